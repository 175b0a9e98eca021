package main

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/dexhq/dex/fsm"
)

// agentRetention is --agent-retention NAME=DURATION[,NAME=DURATION…],
// repeatable: how long the closed sessions of an agent are kept, over
// --retention. "default" names the default agent.
type agentRetention map[string]time.Duration

func (a agentRetention) String() string {
	parts := make([]string, 0, len(a))
	for name, d := range a {
		parts = append(parts, agentLabel(name)+"="+d.String())
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func agentLabel(name string) string {
	if name == "" {
		return "default"
	}
	return name
}

func (a agentRetention) Set(v string) error {
	for _, item := range strings.Split(v, ",") {
		name, dur, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok || name == "" {
			return fmt.Errorf("%q is not NAME=DURATION (e.g. support-bot=720h)", item)
		}
		agent := name
		if name == "default" {
			agent = ""
		} else if r := fsm.CheckAgent(name); r != nil {
			return fmt.Errorf("agent %q: %s", name, r.Reason)
		}
		d, err := time.ParseDuration(dur)
		if err != nil {
			return fmt.Errorf("agent %s: %q is not a duration (e.g. 72h, 30m)", name, dur)
		}
		if d < 0 {
			return fmt.Errorf("agent %s: the retention must not be negative (0: kept for ever)", name)
		}
		if _, dup := a[agent]; dup {
			return fmt.Errorf("agent %s is given twice", name)
		}
		a[agent] = d
	}
	return nil
}
