package dispatch

import (
	"testing"
	"time"

	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// A deleted session is reported touched: the broker reads it as gone and
// owes it nothing, and the purge of its Steps leaves nothing queued.
func TestBrokerForgetsADeletedSession(t *testing.T) {
	f := newBrokerFixture(t, nil)
	s := errored(t, f.c, "e1")
	f.c.Do(&fsmpb.Command{Body: &fsmpb.Command_DeleteSession{DeleteSession: &fsmpb.DeleteSession{SessionId: "e1"}}})
	f.clock.Advance(time.Duration(s.ResumeAtMs-f.clock.Now().UnixMilli()) * time.Millisecond)
	f.promote()
	if got := f.owed(); len(got) != 0 {
		t.Fatalf("owed %v for a deleted session; want nothing", got)
	}
	for f.c.State().IsDeleted("e1") {
		f.c.Do(&fsmpb.Command{Body: &fsmpb.Command_PurgeSession{PurgeSession: &fsmpb.PurgeSession{SessionId: "e1", MaxRows: fsm.MaxPurgeRows, Epoch: f.c.Epoch()}}})
	}
	if n := len(f.b.ready) + len(f.b.delay); n != 0 {
		t.Fatalf("%d rows left in the broker after the purge", n)
	}
}
