package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/dexhq/dex/dispatch"
	"github.com/dexhq/dex/fsm"
)

// agentProviders is --agent-provider NAME=PROVIDER, repeatable: the provider
// whose limits and holds an agent's model calls count against ("default"
// names the default agent).
type agentProviders map[string]string

func (a agentProviders) String() string {
	parts := make([]string, 0, len(a))
	for name, p := range a {
		parts = append(parts, agentLabel(name)+"="+p)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func (a agentProviders) Set(v string) error {
	for _, part := range strings.Split(v, ",") {
		name, provider, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || name == "" || provider == "" {
			return fmt.Errorf("%q is not NAME=PROVIDER (e.g. support-bot=openai)", part)
		}
		agent := name
		if name == "default" {
			agent = ""
		} else if r := fsm.CheckAgent(name); r != nil {
			return fmt.Errorf("agent %q: %s", name, r.Reason)
		}
		if err := checkProviderName(provider); err != nil {
			return err
		}
		if _, dup := a[agent]; dup {
			return fmt.Errorf("agent %s is given twice", name)
		}
		a[agent] = provider
	}
	return nil
}

func checkProviderName(p string) error {
	if len(p) > fsm.MaxFairnessKey || strings.ContainsAny(p, "/=, \t") {
		return fmt.Errorf("provider %q: at most %d bytes, without \"/\", \"=\", \",\" or spaces", p, fsm.MaxFairnessKey)
	}
	return nil
}

// providerLimits is --provider-limit PROVIDER/FIELD=N[,FIELD=N…], repeatable.
type providerLimits map[string]dispatch.ProviderLimit

// providerLimitFields are the fields --provider-limit takes.
var providerLimitFields = []string{"max_concurrent", "calls_per_minute", "tokens_per_minute"}

func (p providerLimits) String() string {
	parts := make([]string, 0, len(p))
	for name, l := range p {
		parts = append(parts, fmt.Sprintf("%s/max_concurrent=%d,calls_per_minute=%d,tokens_per_minute=%d", name, l.MaxConcurrent, l.CallsPerMinute, l.TokensPerMinute))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

func (p providerLimits) Set(v string) error {
	name, fields, ok := strings.Cut(strings.TrimSpace(v), "/")
	if !ok || name == "" || fields == "" {
		return fmt.Errorf("%q is not PROVIDER/FIELD=N[,FIELD=N…] (e.g. openai/max_concurrent=20,calls_per_minute=500)", v)
	}
	if err := checkProviderName(name); err != nil {
		return err
	}
	if _, dup := p[name]; dup {
		return fmt.Errorf("provider %s is given twice", name)
	}
	var l dispatch.ProviderLimit
	for _, f := range strings.Split(fields, ",") {
		field, val, ok := strings.Cut(strings.TrimSpace(f), "=")
		n, err := strconv.ParseUint(val, 10, 32)
		if field == "tokens_per_minute" {
			n, err = strconv.ParseUint(val, 10, 64)
		}
		if !ok || err != nil || n == 0 {
			return fmt.Errorf("provider %s: %q is not FIELD=N with N a positive whole number", name, f)
		}
		switch field {
		case "max_concurrent":
			l.MaxConcurrent = uint32(n)
		case "calls_per_minute":
			l.CallsPerMinute = uint32(n)
		case "tokens_per_minute":
			l.TokensPerMinute = n
		default:
			return fmt.Errorf("provider %s: unknown field %q (one of %s)", name, field, strings.Join(providerLimitFields, ", "))
		}
	}
	p[name] = l
	return nil
}

// providerLimitsPerPartition are the limits each partition's leader
// enforces: a cluster-wide limit split evenly, rounded up, so the
// partitions together allow at most one call per partition more than it.
func (o *options) providerLimitsPerPartition() map[string]dispatch.ProviderLimit {
	n := uint64(max(o.partitions, 1))
	out := make(map[string]dispatch.ProviderLimit, len(o.providerLimits))
	for name, l := range o.providerLimits {
		out[name] = dispatch.ProviderLimit{
			MaxConcurrent:   uint32(ceilDiv(uint64(l.MaxConcurrent), n)),
			CallsPerMinute:  uint32(ceilDiv(uint64(l.CallsPerMinute), n)),
			TokensPerMinute: ceilDiv(l.TokensPerMinute, n),
		}
	}
	return out
}

func ceilDiv(a, b uint64) uint64 { return (a + b - 1) / b }
