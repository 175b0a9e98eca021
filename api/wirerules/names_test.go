package wirerules

import (
	"testing"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// Every status and outcome a session or a Step can show has its own
// documented name, so no page or CLI line prints "unknown" for a real one.
func TestEveryStatusAndOutcomeHasItsOwnName(t *testing.T) {
	seen := map[string]dexv1.SessionStatus{}
	for n := range dexv1.SessionStatus_name {
		st := dexv1.SessionStatus(n)
		name := SessionStatusName(st)
		if st == dexv1.SessionStatus_SESSION_STATUS_UNSPECIFIED {
			if name != "unknown" {
				t.Errorf("%v is named %q; want unknown", st, name)
			}
			continue
		}
		if name == "unknown" {
			t.Errorf("%v has no name", st)
		}
		if prev, dup := seen[name]; dup {
			t.Errorf("%v and %v are both named %q", prev, st, name)
		}
		seen[name] = st
	}
	for n := range dexv1.Outcome_name {
		o := dexv1.Outcome(n)
		if got := OutcomeName(o); (got == "") != (o == dexv1.Outcome_OUTCOME_UNSPECIFIED) {
			t.Errorf("%v is named %q", o, got)
		}
	}
	if got := OutcomeName(dexv1.Outcome_OUTCOME_UNKNOWN); got != "outcome_unknown" {
		t.Errorf("OUTCOME_UNKNOWN is named %q; want outcome_unknown", got)
	}
}
