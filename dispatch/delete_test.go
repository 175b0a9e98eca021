package dispatch

import (
	"testing"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/fsm"
)

// A deleted session is reported touched: the broker reads it as gone and
// owes it nothing, and the purge of its Steps leaves nothing queued.
func TestBrokerForgetsADeletedSession(t *testing.T) {
	f := newBrokerFixture(t, nil)
	s := errored(t, f.c, "e1")
	f.c.Do(&dexv1.Command{Body: &dexv1.Command_DeleteSession{DeleteSession: &dexv1.DeleteSession{SessionId: "e1"}}})
	f.clock.Advance(time.Duration(s.ResumeAtMs-f.clock.Now().UnixMilli()) * time.Millisecond)
	f.promote()
	if got := f.owed(); len(got) != 0 {
		t.Fatalf("owed %v for a deleted session; want nothing", got)
	}
	for f.c.State().IsDeleted("e1") {
		f.c.Do(&dexv1.Command{Body: &dexv1.Command_PurgeSession{PurgeSession: &dexv1.PurgeSession{SessionId: "e1", MaxRows: fsm.MaxPurgeRows, Epoch: f.c.Epoch()}}})
	}
	if n := len(f.b.ready) + len(f.b.delay); n != 0 {
		t.Fatalf("%d rows left in the broker after the purge", n)
	}
}
