package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

func TestSessionStartSendsTheDispatchOrder(t *testing.T) {
	f := &fakeSessions{}
	addr := startFake(t, f)
	if _, err := run(t, "--addr", addr, "session", "start", "--id", "d1", "--priority", "5", "--fairness-key", "team-a", "--fairness-weight", "1000"); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, "--addr", addr, "session", "start", "--id", "d2"); err != nil {
		t.Fatal(err)
	}
	if r := f.created[0]; r.Priority != 5 || r.FairnessKey != "team-a" || r.FairnessWeight != 1000 {
		t.Fatalf("start with the flags sent %v", r)
	}
	if r := f.created[1]; r.Priority != 0 || r.FairnessKey != "" || r.FairnessWeight != 0 {
		t.Fatalf("start without them sent %v; want zeros (the parent's, else the defaults)", r)
	}
}

// An out-of-range value is a usage error before any call: a parent's
// partition is not even looked up.
func TestSessionStartRefusesABadDispatchOrder(t *testing.T) {
	f := &fakeSessions{}
	addr := startFake(t, f)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--priority", "0"}, "--priority must be between 1 and 5, not 0"},
		{[]string{"--priority", "6"}, "--priority must be between 1 and 5, not 6"},
		{[]string{"--priority", "-1"}, "--priority must be between 1 and 5, not -1"},
		{[]string{"--fairness-weight", "0"}, "--fairness-weight must be between 1 and 1000, not 0"},
		{[]string{"--fairness-weight", "1001"}, "--fairness-weight must be between 1 and 1000, not 1001"},
		{[]string{"--fairness-key", strings.Repeat("k", 257)}, "--fairness-key is 257 bytes; at most 256"},
		{[]string{"--parent", "p1", "--priority", "9"}, "--priority must be between 1 and 5, not 9"},
	} {
		args := append([]string{"--addr", addr, "session", "start"}, c.args...)
		var out, errb bytes.Buffer
		if code := execute(args, &out, &errb); code != 2 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("session start %s: exit %d, stderr %q; want exit 2 with %q", strings.Join(c.args, " "), code, errb.String(), c.want)
		}
	}
	if len(f.created) != 0 {
		t.Fatalf("refused input sent %d creates", len(f.created))
	}
}

func TestSessionShowPrintsTheDispatchOrderAndProvider(t *testing.T) {
	s := &dexv1.Session{Id: "s", Status: dexv1.SessionStatus_SESSION_STATUS_IDLE, Priority: 4, FairnessKey: "team-a", FairnessWeight: 3, Provider: "openai"}
	var out bytes.Buffer
	printSession(&out, toSessionJSON(s, nil), 1)
	if want := "dispatch: priority 4, fairness key team-a (weight 3), provider openai\n"; !strings.Contains(out.String(), want) {
		t.Fatalf("session show lacks %q:\n%s", want, out.String())
	}
	var js bytes.Buffer
	if err := printJSON(&js, toSessionJSON(s, nil)); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(js.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got["priority"] != 4.0 || got["fairness_key"] != "team-a" || got["fairness_weight"] != 3.0 || got["provider"] != "openai" {
		t.Fatalf("session show --json: %s", js.String())
	}

	// None given: the defaults, priority 3 and weight 1.
	out.Reset()
	bare := toSessionJSON(&dexv1.Session{Id: "b", Status: dexv1.SessionStatus_SESSION_STATUS_IDLE}, nil)
	printSession(&out, bare, 1)
	if want := "dispatch: priority 3, no fairness key, no provider\n"; !strings.Contains(out.String(), want) {
		t.Fatalf("session show lacks %q:\n%s", want, out.String())
	}
	if bare.Priority != 3 || bare.FairnessWeight != 1 {
		t.Fatalf("defaults as JSON: %+v", bare.dispatchJSON)
	}

	// The key and the provider come from users: escaped for the terminal.
	out.Reset()
	printSession(&out, toSessionJSON(&dexv1.Session{Id: "e", FairnessKey: "k\x1b[31m", Provider: "p\n"}, nil), 1)
	if strings.Contains(out.String(), "\x1b") || !strings.Contains(out.String(), `fairness key k\x1b[31m (weight 1), provider p\n`) {
		t.Fatalf("unescaped:\n%q", out.String())
	}
}

func TestStatusShowsProviders(t *testing.T) {
	now := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	ps := []*dexv1.ProviderStatus{
		{Provider: "openai", MaxConcurrent: 8, CallsPerMinute: 600, TokensPerMinute: 2_000_000, Running: 3, Throttled: 5,
			Hold: &dexv1.ProviderHold{Provider: "openai", UntilMs: now.Add(41500 * time.Millisecond).UnixMilli(), StepId: "s1-s4", SetAtMs: now.Add(-time.Second).UnixMilli()}},
		{Provider: "anthropic", Running: 1},
		{Provider: "old", Hold: &dexv1.ProviderHold{UntilMs: now.Add(-time.Second).UnixMilli(), StepId: "s2-s1"}},
	}
	var text bytes.Buffer
	printProviders(&text, ps, now)
	lines := strings.Split(text.String(), "\n")
	if len(lines) < 5 || !strings.HasPrefix(lines[1], "Providers") {
		t.Fatalf("providers section:\n%s", text.String())
	}
	for i, want := range [][]string{
		{"openai", "8", "600", "2000000", "3", "5", "until 2026-12-04T10:00:41Z (41.5s left), set by step s1-s4"},
		{"anthropic", "-", "-", "-", "1", "0", "-"},
		{"old", "-", "-", "-", "0", "0", "(passed), set by step s2-s1"},
	} {
		row := lines[3+i]
		for _, w := range want {
			if !strings.Contains(row, w) {
				t.Errorf("row %q lacks %q", row, w)
			}
		}
	}

	got := providersJSON(ps, now)
	if len(got) != 3 || got[0].MaxConcurrent != 8 || got[0].TokensPerMinute != 2_000_000 || got[0].Throttled != 5 {
		t.Fatalf("providers as JSON: %+v", got)
	}
	if h := got[0].Hold; h == nil || h.RemainingMs != 41500 || h.StepID != "s1-s4" || h.UntilMs != ps[0].Hold.UntilMs {
		t.Fatalf("hold as JSON: %+v", got[0].Hold)
	}
	if got[1].Hold != nil || got[2].Hold.RemainingMs != 0 {
		t.Fatalf("no hold or a passed one as JSON: %+v %+v", got[1].Hold, got[2].Hold)
	}

	// Through status: the section and the JSON field; none without providers.
	r := &dexv1.StatusResponse{Leader: "n1", Providers: ps[1:2]}
	text.Reset()
	printStatus(&text, r)
	if !strings.Contains(text.String(), "PROVIDER") || !strings.Contains(text.String(), "anthropic") {
		t.Fatalf("status lacks the providers:\n%s", text.String())
	}
	var js bytes.Buffer
	if err := printStatusJSON(&js, r); err != nil {
		t.Fatal(err)
	}
	var sj statusJSON
	if err := json.Unmarshal(js.Bytes(), &sj); err != nil {
		t.Fatal(err)
	}
	if len(sj.Providers) != 1 || sj.Providers[0].Provider != "anthropic" || sj.Providers[0].Running != 1 {
		t.Fatalf("status --json providers: %+v", sj.Providers)
	}
	text.Reset()
	printStatus(&text, &dexv1.StatusResponse{Leader: "n1"})
	if strings.Contains(text.String(), "PROVIDER") {
		t.Fatalf("a cluster without providers lists them:\n%s", text.String())
	}
}
