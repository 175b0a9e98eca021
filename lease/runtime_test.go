package lease_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/lease"
)

// journal notes what the runtime did to its services, in order.
type journal struct {
	mu  sync.Mutex
	got []string
}

func (j *journal) add(s string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.got = append(j.got, s)
}

func (j *journal) take() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := j.got
	j.got = nil
	return out
}

type service struct {
	name string
	j    *journal
	fail bool
}

func (s *service) EstablishLeadership(context.Context, uint64) error {
	s.j.add("establish " + s.name)
	if s.fail {
		return errors.New("refused")
	}
	return nil
}

func (s *service) RevokeLeadership() { s.j.add("revoke " + s.name) }

type drainer struct{ service }

func (d *drainer) Drain() { d.j.add("drain " + d.name) }

type reader struct {
	service
	applied int
}

func (r *reader) Applied(*fsm.Applied) { r.applied++ }

// The runtime starts its services in the order given and stops them in the
// reverse one; a new establishment revokes the old one first.
func TestRuntimeStartsInOrderAndStopsInReverse(t *testing.T) {
	j := &journal{}
	a, b := &service{name: "a", j: j}, &drainer{service{name: "b", j: j}}
	c := &reader{service: service{name: "c", j: j}}
	rt := lease.NewRuntime(zaptest.NewLogger(t), a, b, c)
	if err := rt.EstablishLeadership(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if got, want := j.take(), []string{"establish a", "establish b", "establish c"}; !slices.Equal(got, want) {
		t.Fatalf("establish: %v; want %v", got, want)
	}
	rt.Drain()
	if got, want := j.take(), []string{"drain b"}; !slices.Equal(got, want) {
		t.Fatalf("drain: %v; want %v", got, want)
	}
	rt.Applied(&fsm.Applied{})
	if c.applied != 1 {
		t.Fatalf("the stream reader heard %d entries; want 1", c.applied)
	}
	if err := rt.EstablishLeadership(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	if got, want := j.take(), []string{"revoke c", "revoke b", "revoke a", "establish a", "establish b", "establish c"}; !slices.Equal(got, want) {
		t.Fatalf("re-establish: %v; want %v", got, want)
	}
	rt.RevokeLeadership()
	rt.RevokeLeadership() // twice: nothing more
	if got, want := j.take(), []string{"revoke c", "revoke b", "revoke a"}; !slices.Equal(got, want) {
		t.Fatalf("revoke: %v; want %v", got, want)
	}
}

// A service that fails to start leaves nothing started: it and those before
// it are revoked in reverse order.
func TestRuntimeRevokesWhatStartedWhenOneFails(t *testing.T) {
	j := &journal{}
	rt := lease.NewRuntime(zaptest.NewLogger(t), &service{name: "a", j: j}, &service{name: "b", j: j, fail: true}, &service{name: "c", j: j})
	if err := rt.EstablishLeadership(context.Background(), 1); err == nil {
		t.Fatal("established with a service that refused")
	}
	if got, want := j.take(), []string{"establish a", "establish b", "revoke b", "revoke a"}; !slices.Equal(got, want) {
		t.Fatalf("%v; want %v", got, want)
	}
	rt.RevokeLeadership()
	if got := j.take(); len(got) != 0 {
		t.Fatalf("revoke after a failed establishment: %v; want nothing", got)
	}
}

// Closing a term cancels its context and waits for the work in it; a closed
// term takes no more work, and Open closes the term before it.
func TestFenceClosesTheTermAndWaitsForItsWork(t *testing.T) {
	var f lease.Fence
	t1 := f.Open(7)
	if f.Epoch() != 7 || f.Current() != t1 {
		t.Fatalf("epoch %d; want the open term's 7", f.Epoch())
	}
	ended := make(chan struct{})
	t1.Go(func() {
		<-t1.Context().Done()
		time.Sleep(20 * time.Millisecond)
		close(ended)
	})
	poll := f.Enter()
	if poll != t1 {
		t.Fatal("Enter did not enter the open term")
	}
	closed := make(chan struct{})
	var dropped bool
	go func() {
		f.Close(func() { dropped = true })
		close(closed)
	}()
	select {
	case <-closed:
		t.Fatal("Close returned while a poll was still in the term")
	case <-time.After(50 * time.Millisecond):
	}
	poll.Leave()
	<-closed
	select {
	case <-ended:
	default:
		t.Fatal("Close returned before the term's goroutine ended")
	}
	if !dropped || f.Current() != nil || f.Epoch() != 0 {
		t.Fatalf("after Close: dropped %v, current %v", dropped, f.Current())
	}
	if t1.Go(func() {}) || t1.Enter() || f.Enter() != nil {
		t.Fatal("a closed term took more work")
	}
	t2 := f.Open(8)
	t3 := f.Open(9)
	if t2.Context().Err() == nil || f.Current() != t3 {
		t.Fatal("Open did not close the term before it")
	}
	if f.Close(nil) != t3 || f.Close(nil) != nil {
		t.Fatal("Close did not return the open term, once")
	}
}
