package stream

import (
	"errors"
	"testing"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// A turn cancelled while its model streams abandons the attempt's output:
// its watchers are told, at the offset the hub holds, as for a failure.
func TestACancelledAttemptsOutputIsAbandoned(t *testing.T) {
	c, _, svc := leading(t, testLimits())
	_, k := runningModel(t, c, "s")
	if _, err := svc.Hub().Append("s", k, 0, "half an ans"); err != nil {
		t.Fatal(err)
	}
	w := svc.Hub().Watch("s", nil)
	defer w.Close()
	drain(w)
	c.Do(&fsmpb.Command{Body: &fsmpb.Command_CancelTurn{CancelTurn: &fsmpb.CancelTurn{SessionId: "s", By: "ops", Reason: "wrong task"}}})
	got := drain(w)
	want := Delta{Session: "s", Key: k, Kind: Abandoned, Offset: uint64(len("half an ans"))}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("after the cancel the watcher got %+v; want only %+v", got, want)
	}
}

// Output that reaches the hub after its attempt's end was applied (the
// caller read the attempt as running just before) is refused as ended: held,
// it would never be ended, and its watchers would wait for an end.
func TestOutputAfterItsAttemptEndedIsRefused(t *testing.T) {
	c, _, svc := leading(t, testLimits())
	ref, k := runningModel(t, c, "s")
	w := svc.Hub().Watch("s", nil)
	defer w.Close()
	c.Complete(ref, "whole output")
	if _, err := svc.Hub().Append("s", k, 0, "late"); !errors.Is(err, ErrEnded) {
		t.Fatalf("an append after the end: %v; want ErrEnded", err)
	}
	if got := drain(w); len(got) != 0 {
		t.Fatalf("the watcher got %+v after the end; want nothing", got)
	}
}
