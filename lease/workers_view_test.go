package lease_test

import (
	"context"
	"testing"
)

func TestWorkers_ContactsAreTheLeadersMemoryOnly(t *testing.T) {
	c, clock, w := newWorkersFixture(t)
	if seen, open := w.Contacts(); len(seen) != 0 || len(open) != 0 {
		t.Fatalf("off the leader: %v %v; want nothing", seen, open)
	}
	if err := w.EstablishLeadership(context.Background(), c.Epoch()); err != nil {
		t.Fatal(err)
	}
	clock.Advance(ttl / 4)
	done := w.Polling("w2")
	seen, open := w.Contacts()
	if !seen["w2"].Equal(clock.Now()) || open["w2"] != 1 || open["w1"] != 0 {
		t.Fatalf("seen %v, open %v; want w2 seen now with one open poll", seen, open)
	}
	done()
	if _, open := w.Contacts(); open["w2"] != 0 {
		t.Fatalf("open polls %v after the poll returned", open)
	}
	w.RevokeLeadership()
	if seen, _ := w.Contacts(); len(seen) != 0 {
		t.Fatalf("after the leadership ended: %v", seen)
	}
}
