package dispatch

import (
	"testing"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// The in-flight list gives a prediction the proposals raft has not answered,
// in the order proposed, forgets each once answered, and gives none past
// maxPredictOver.
func TestInFlight_ListsUnansweredProposalsInOrder(t *testing.T) {
	var f inFlight
	cmd := func(id string) *fsmpb.Command {
		return &fsmpb.Command{Body: &fsmpb.Command_SendMessage{SendMessage: &fsmpb.SendMessage{SessionId: id}}}
	}
	ids := func(cmds []*fsmpb.Command) (out []string) {
		for _, c := range cmds {
			out = append(out, c.GetSendMessage().GetSessionId())
		}
		return out
	}
	a := f.add(cmd("a"))
	bc := f.add(cmd("b"), cmd("c"))
	if got := ids(f.list()); len(got) != 3 || got[0] != "a" || got[1] != "b" || got[2] != "c" {
		t.Fatalf("in flight %v; want [a b c]", got)
	}
	f.done(bc[0])
	f.done(bc[0]) // answered twice: no harm
	if got := ids(f.list()); len(got) != 2 || got[0] != "a" || got[1] != "c" {
		t.Fatalf("in flight %v after b was answered; want [a c]", got)
	}
	f.done(a[0])
	f.done(bc[1])
	if got := f.list(); len(got) != 0 || len(f.cmds) != 0 {
		t.Fatalf("in flight %v after every answer; want none", got)
	}
	for range maxPredictOver + 1 {
		f.add(cmd("x"))
	}
	if got := f.list(); got != nil {
		t.Fatalf("%d listed with %d in flight; want none past %d", len(got), len(f.cmds), maxPredictOver)
	}
}
