package fsm

import (
	"strings"
	"testing"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// A model output whose tool calls cannot be keyed is refused whole, naming
// the tool, and the attempt can still report a good output afterwards.
func TestModelOutput_BadCallIDsAreRefusedAndChangeNothing(t *testing.T) {
	cases := []struct {
		name  string
		calls []*fsmpb.ToolCall
		want  []string
	}{
		{"no call id", []*fsmpb.ToolCall{call("c1", "lookup", "{}"), call("", "save_note", "{}")},
			[]string{"tool call 2", `"save_note"`, "no call id"}},
		{"duplicate call id", []*fsmpb.ToolCall{call("c1", "lookup", "{}"), call("c1", "save_note", "{}")},
			[]string{`"c1"`, "twice", `"lookup"`, `"save_note"`}},
		{"no tool", []*fsmpb.ToolCall{call("c1", "", "{}")},
			[]string{"tool call 1", `"c1"`, "names no tool"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := newDriver(t)
			d.createSession("s", "", "go")
			h := d.startNext("s", kRunModel).claim()
			r := d.refused(h.output("calling", tc.calls...), CodeInvalid)
			for _, w := range tc.want {
				if !strings.Contains(r.Reason, w) {
					t.Errorf("rejection %q does not say %s", r.Reason, w)
				}
			}
			h.seq-- // the refused report logged nothing: its seq is free again
			h.answer("done")
			wantStatus(t, d.session("s"), fsmpb.SessionStatus_SESSION_STATUS_IDLE)
		})
	}
}
