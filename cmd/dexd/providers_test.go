package main

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/dexhq/dex/dispatch"
)

func TestProviderFlags(t *testing.T) {
	base := []string{"--id", "n1", "--data-dir", t.TempDir(), "--raft-addr", "127.0.0.1:1",
		"--grpc-addr", "127.0.0.1:2", "--http-addr", "127.0.0.1:3", "--peers", "n1=127.0.0.1:1"}
	o, err := parse(append(base, "--agent-provider", "support=openai,default=anthropic",
		"--provider-limit", "openai/max_concurrent=5,calls_per_minute=100,tokens_per_minute=90000",
		"--provider-limit", "anthropic/calls_per_minute=7", "--partitions", "3"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.agentProviders["support"] != "openai" || o.agentProviders[""] != "anthropic" {
		t.Fatalf("agent providers %v", o.agentProviders)
	}
	if l := o.providerLimits["openai"]; l != (dispatch.ProviderLimit{MaxConcurrent: 5, CallsPerMinute: 100, TokensPerMinute: 90000}) {
		t.Fatalf("openai's limits %+v", l)
	}
	// Three partitions' leaders each enforce a third, rounded up.
	per := o.providerLimitsPerPartition()
	if l := per["openai"]; l != (dispatch.ProviderLimit{MaxConcurrent: 2, CallsPerMinute: 34, TokensPerMinute: 30000}) {
		t.Fatalf("openai's limits per partition %+v", l)
	}
	if l := per["anthropic"]; l != (dispatch.ProviderLimit{CallsPerMinute: 3}) {
		t.Fatalf("anthropic's limits per partition %+v", l)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--agent-provider", "support"}, `"support" is not NAME=PROVIDER`},
		{[]string{"--agent-provider", "a=x,a=y"}, "agent a is given twice"},
		{[]string{"--agent-provider", "a=open ai"}, `provider "open ai"`},
		{[]string{"--agent-provider", "b d=x"}, `agent "b d"`},
		{[]string{"--provider-limit", "openai"}, `"openai" is not PROVIDER/FIELD=N`},
		{[]string{"--provider-limit", "openai/rpm=5"}, `unknown field "rpm"`},
		{[]string{"--provider-limit", "openai/max_concurrent=0"}, "positive whole number"},
		{[]string{"--provider-limit", "openai/max_concurrent=-1"}, "positive whole number"},
		{[]string{"--provider-limit", "openai/max_concurrent=1", "--provider-limit", "openai/calls_per_minute=1"}, "provider openai is given twice"},
	} {
		_, err := parse(append(base, tc.args...), io.Discard)
		var ue *usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v; want a usage error saying %q", tc.args, err, tc.want)
		}
	}
}
