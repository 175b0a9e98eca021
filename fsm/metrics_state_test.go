package fsm

import (
	"testing"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// Sessions in a turn are not in the status index; the counts still see them.
func TestSessionsByStatus_CountsEveryStatusInAndOutOfATurn(t *testing.T) {
	d := newDriver(t)
	d.createSession("idle", "", "")
	d.createSession("running", "", "hello") // its RunModel queued
	d.createSession("deleted", "", "")
	d.do(deleteCmd("deleted"))
	want := map[fsmpb.SessionStatus]int{sIdle: 1, sRunning: 1, fsmpb.SessionStatus_SESSION_STATUS_DELETED: 1}
	for st, n := range d.f.State().SessionsByStatus() {
		if n != want[st] {
			t.Fatalf("%d sessions %s; want %d (all: %v)", n, StatusName(st), want[st], d.f.State().SessionsByStatus())
		}
	}
	if got := d.f.State().DeletedSessions(10); len(got) != 1 || got[0] != "deleted" {
		t.Fatalf("deleted sessions %v; want [deleted]", got)
	}
	if got := d.f.State().IdleBefore(d.now+1, 10); len(got) != 1 || got[0] != "idle" {
		t.Fatalf("idle sessions %v; want [idle] (the running one is not idle)", got)
	}
}

func TestSessionCounts_ByLifecycle(t *testing.T) {
	d := newDriver(t)
	d.createSession("open", "", "")
	d.createSession("busy", "", "hello")
	d.createSession("closing", "", "hello")
	d.do(closeCmd("closing", 0))
	d.createSession("closed", "", "")
	d.do(closeCmd("closed", 0))
	d.createSession("deleted", "", "")
	d.do(closeCmd("deleted", 0))
	d.do(deleteCmd("deleted"))
	c := d.f.State().SessionCounts()
	want := map[string]int{LifecycleOpen: 2, LifecycleClosing: 1, LifecycleClosed: 1, LifecycleDeleted: 1}
	for state, n := range c.ByLifecycle {
		if n != want[state] {
			t.Fatalf("%d sessions %s; want %d (all: %v)", n, state, want[state], c.ByLifecycle)
		}
	}
	if len(c.ByLifecycle) != len(Lifecycles) || c.ByStatus[sClosed] != 1 || c.ByStatus[sRunning] != 2 {
		t.Fatalf("counts %v", c)
	}
}
