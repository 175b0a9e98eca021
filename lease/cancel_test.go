package lease_test

import (
	"context"
	"strings"
	"testing"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// A cancelled session's running attempt hears so on its Worker's next
// heartbeat, with the reason: the Worker stops it.
func TestHeartbeatOfACancelledTurnsAttemptSaysCancelled(t *testing.T) {
	f := newFixture(t)
	f.m.Establish(context.Background(), f.c.Epoch())
	ref := f.startModel("s1")
	if cancelled, reason := f.m.Heartbeat(workerRef(ref)); cancelled {
		t.Fatalf("running attempt cancelled: %s", reason)
	}
	if res := f.c.Do(&fsmpb.Command{Body: &fsmpb.Command_CancelTurn{CancelTurn: &fsmpb.CancelTurn{SessionId: "s1", By: "ops"}}}); res.Err != nil {
		t.Fatal(res.Err)
	}
	cancelled, reason := f.m.Heartbeat(workerRef(ref))
	if !cancelled || !strings.Contains(reason, "cancelled by ops") {
		t.Fatalf("heartbeat after the cancel = %v %q; want cancelled, naming who", cancelled, reason)
	}
}
