package stream

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/lease/leasetest"
)

// hookedState is the cluster's state; before, when set, runs once at the
// next read, then the read is made (the applied stream's reads included).
type hookedState struct {
	c      *leasetest.Cluster
	before func()
}

func (s *hookedState) State() *fsm.State {
	if f := s.before; f != nil {
		s.before = nil
		f()
	}
	return s.c.State()
}

// leading is a leader's live output service fed by the applied stream of
// an in-process cluster with one model Worker, as dexd wires it; a new
// leader's hub holds nothing.
func leading(t *testing.T, l Limits) (*leasetest.Cluster, *hookedState, *Service) {
	t.Helper()
	c := leasetest.New(t)
	src := &hookedState{c: c}
	svc := NewService(src, l)
	c.OnApplied(svc.Applied)
	if err := svc.EstablishLeadership(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.RevokeLeadership)
	c.RegisterWorker("w1", true)
	return c, src, svc
}

// runningModel creates a session whose RunModel Step runs its attempt 1.
func runningModel(t *testing.T, c *leasetest.Cluster, session string) (*fsmpb.AttemptRef, Key) {
	t.Helper()
	c.CreateSession(session, "go")
	return startModel(t, c, session)
}

// startModel starts the session's queued RunModel Step.
func startModel(t *testing.T, c *leasetest.Cluster, session string) (*fsmpb.AttemptRef, Key) {
	t.Helper()
	queued := c.Queued(session)
	if len(queued) != 1 {
		t.Fatalf("%d queued Steps; want the RunModel", len(queued))
	}
	at := c.Start(queued[0].Id, "w1")
	return leasetest.Ref(queued[0].Id, at), Key{Step: queued[0].Id, Attempt: at.N}
}

func failFor(c *leasetest.Cluster, ref *fsmpb.AttemptRef) {
	c.Fail(ref, fsmpb.ErrorType_ERROR_TYPE_INVALID_REQUEST, "refused")
}

// A watch resumes after a takeover with the offsets of attempts that ended
// before it came back, with nothing of them on the new leader's hub (End
// told no one): it is told each end at once, at the offset it holds; Ended
// for the attempt that succeeded, Abandoned for the one that failed.
func TestResume_AnAttemptThatEndedBeforeTheWatchIsToldAtOnce(t *testing.T) {
	c, _, svc := leading(t, testLimits())
	okRef, ok := runningModel(t, c, "ok")
	badRef, bad := runningModel(t, c, "bad")
	c.Complete(okRef, "whole output")
	failFor(c, badRef)

	w := svc.Hub().Watch("ok", map[Key]uint64{ok: 120})
	defer w.Close()
	got := drain(w)
	want := Delta{Session: "ok", Key: ok, Kind: Ended, Offset: 120}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("the watch resumed after the result got %+v; want only %+v", got, want)
	}
	wb := svc.Hub().Watch("bad", map[Key]uint64{bad: 40})
	defer wb.Close()
	got = drain(wb)
	want = Delta{Session: "bad", Key: bad, Kind: Abandoned, Offset: 40}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("the watch resumed after the failure got %+v; want only %+v", got, want)
	}
	// Still open, and told nothing more.
	select {
	case d, open := <-w.C():
		t.Fatalf("after the end: %+v (open %v)", d, open)
	default:
	}
}

// An attempt the watch resumes that still runs yields nothing until it
// ends, and then its end once; nor does an attempt the state does not hold
// as the session's (another session's Step, a Step or an attempt it does
// not know) yield anything.
func TestResume_ARunningOrUnknownAttemptYieldsNoEnd(t *testing.T) {
	c, _, svc := leading(t, testLimits())
	runRef, run := runningModel(t, c, "run")
	otherRef, other := runningModel(t, c, "other")
	c.Complete(otherRef, "done")
	w := svc.Hub().Watch("run", map[Key]uint64{
		run:                            7,
		other:                          3, // ended, but of another session
		{Step: "run-none", Attempt: 1}: 1,
		{Step: run.Step, Attempt: 2}:   0, // not started (or not applied yet)
		{Step: run.Step, Attempt: 0}:   0,
	})
	defer w.Close()
	if got := drain(w); len(got) != 0 {
		t.Fatalf("the watch got %+v; want nothing while its attempt runs", got)
	}
	c.Complete(runRef, "done")
	want := Delta{Session: "run", Key: run, Kind: Ended, Offset: 7}
	if got := drain(w); len(got) != 1 || got[0] != want {
		t.Fatalf("after the result: %+v; want only %+v", got, want)
	}
}

// An attempt the hub holds behaves as before: its text from the watch's
// offset, then its end once if it ended.
func TestResume_AnAttemptTheHubHoldsIsToldFromTheHub(t *testing.T) {
	c, _, svc := leading(t, testLimits())
	ref, k := runningModel(t, c, "s")
	if _, err := svc.Hub().Append("s", k, 0, "Hello"); err != nil {
		t.Fatal(err)
	}
	running := svc.Hub().Watch("s", map[Key]uint64{k: 2})
	defer running.Close()
	if got := drain(running); len(got) != 1 || got[0].Kind != Text || got[0].Text != "llo" || got[0].Offset != 2 {
		t.Fatalf("resumed at 2 while it runs: %+v; want the text from 2", got)
	}
	c.Complete(ref, "Hello")
	if got := drain(running); len(got) != 1 || got[0].Kind != Ended || got[0].Offset != 5 {
		t.Fatalf("after the result: %+v; want the end at the hub's 5", got)
	}
	late := svc.Hub().Watch("s", map[Key]uint64{k: 2})
	defer late.Close()
	got := drain(late)
	if len(got) != 2 || got[0].Text != "llo" || got[1] != (Delta{Session: "s", Key: k, Kind: Ended, Offset: 5}) {
		t.Fatalf("resumed at 2 after the end: %+v; want the text from 2 and one end at 5", got)
	}
}

// An End that comes after the watch registered but before it read the
// state is told once, not once by End and again by the watch.
func TestResume_AnEndBetweenRegistrationAndTheStateReadIsToldOnce(t *testing.T) {
	c, src, svc := leading(t, testLimits())
	ref, k := runningModel(t, c, "s")
	src.before = func() { c.Complete(ref, "done") }
	w := svc.Hub().Watch("s", map[Key]uint64{k: 9})
	defer w.Close()
	if src.before != nil {
		t.Fatal("the watch read no state")
	}
	want := Delta{Session: "s", Key: k, Kind: Ended, Offset: 9}
	if got := drain(w); len(got) != 1 || got[0] != want {
		t.Fatalf("the watch got %+v; want only %+v", got, want)
	}
}

// Whatever the order of an attempt's end and a watch that resumes it, the
// watch is told the end exactly once.
func TestResume_AWatchRacingTheEndIsToldOnce(t *testing.T) {
	c, _, svc := leading(t, testLimits())
	for i := range 100 {
		session := fmt.Sprintf("s%d", i)
		ref, k := runningModel(t, c, session)
		result := &fsmpb.Command{Body: &fsmpb.Command_ReportAttempt{ReportAttempt: &fsmpb.ReportAttempt{
			Ref:    &fsmpb.AttemptRef{StepId: ref.StepId, Attempt: ref.Attempt, Token: ref.Token, Seq: 1},
			Result: &fsmpb.AttemptResult{Outcome: &fsmpb.AttemptResult_ModelOutput{ModelOutput: &fsmpb.ModelOutput{Text: "done"}}},
		}}}
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := c.Propose(context.Background(), result)
			if err == nil && res.Err != nil {
				err = res.Err
			}
			if err != nil {
				t.Errorf("round %d: the result: %v", i, err)
			}
		}()
		w := svc.Hub().Watch(session, map[Key]uint64{k: 4})
		wg.Wait()
		want := Delta{Session: session, Key: k, Kind: Ended, Offset: 4}
		if got := drain(w); len(got) != 1 || got[0] != want {
			t.Fatalf("round %d: the watch got %+v; want only %+v", i, got, want)
		}
		w.Close()
	}
}

// A watch that resumes more ended attempts than its buffer holds gets every
// end and stays open: dropped as behind, it would resume with the same
// offsets and be dropped again.
func TestResume_MoreEndsThanTheBufferDoNotDropTheWatch(t *testing.T) {
	l := testLimits()
	l.WatcherBuffer = 1
	c, _, svc := leading(t, l)
	want := map[Key]Delta{}
	ref, k := runningModel(t, c, "s")
	for i := range 3 {
		kind := Ended
		if i < 2 {
			c.Complete(ref, "done")
			c.Send("s", fmt.Sprintf("m%d", i+1), "more")
		} else {
			failFor(c, ref)
			kind = Abandoned
		}
		want[k] = Delta{Session: "s", Key: k, Kind: kind, Offset: uint64(10 + i)}
		if i < 2 {
			ref, k = startModel(t, c, "s")
		}
	}
	from := map[Key]uint64{}
	for k, d := range want {
		from[k] = d.Offset
	}
	w := svc.Hub().Watch("s", from)
	defer w.Close()
	got := drain(w)
	if len(got) != len(want) || w.Behind() {
		t.Fatalf("the watch got %+v, behind %v; want %d ends and still open", got, w.Behind(), len(want))
	}
	for _, d := range got {
		if d != want[d.Key] {
			t.Fatalf("got %+v; want %+v", d, want[d.Key])
		}
	}
}

// An attempt the hub took output of after the watch registered (its Worker
// resent it) has its end told by the hub, at the hub's offset, once: not
// again by the watch at its own offset, whether the hub's End comes after
// the watch read the state or came before and its output already went.
func TestResume_AnAttemptTheHubTookAfterTheRegistrationIsToldItsEndOnce(t *testing.T) {
	t.Run("its End comes after the state read", func(t *testing.T) {
		c, src, svc := leading(t, testLimits())
		ref, k := runningModel(t, c, "s")
		src.before = func() {
			if _, err := svc.Hub().Append("s", k, 0, "Hi"); err != nil {
				t.Fatal(err)
			}
			// Applied, but not yet read from the applied stream.
			c.OnApplied(nil)
			c.Complete(ref, "Hi")
			c.OnApplied(svc.Applied)
		}
		w := svc.Hub().Watch("s", map[Key]uint64{k: 9})
		defer w.Close()
		if src.before != nil {
			t.Fatal("the watch read no state")
		}
		svc.Hub().End("s", k, false)
		got := drain(w)
		if len(got) != 2 || got[0].Text != "Hi" || got[1] != (Delta{Session: "s", Key: k, Kind: Ended, Offset: 2}) {
			t.Fatalf("the watch got %+v; want the text, then one end at the hub's 2", got)
		}
	})
	t.Run("its End came and its output went before the state read", func(t *testing.T) {
		l := testLimits()
		l.Linger = time.Millisecond
		c, src, svc := leading(t, l)
		ref, k := runningModel(t, c, "s")
		h := svc.Hub()
		src.before = func() {
			if _, err := h.Append("s", k, 0, "Hi"); err != nil {
				t.Fatal(err)
			}
			c.Complete(ref, "Hi")
			leasetest.Eventually(t, "the ended output dropped after its linger", func() bool {
				h.mu.Lock()
				defer h.mu.Unlock()
				return len(h.outputs) == 0
			})
		}
		w := h.Watch("s", map[Key]uint64{k: 9})
		defer w.Close()
		if src.before != nil {
			t.Fatal("the watch read no state")
		}
		got := drain(w)
		if len(got) != 2 || got[0].Text != "Hi" || got[1] != (Delta{Session: "s", Key: k, Kind: Ended, Offset: 2}) {
			t.Fatalf("the watch got %+v; want the text, then one end at the hub's 2", got)
		}
	})
}

// A watch closed between its registration and its state read (the
// leadership ended) is told nothing more: its channel is closed.
func TestResume_AWatchClosedBeforeItsStateReadIsToldNothing(t *testing.T) {
	c, src, svc := leading(t, testLimits())
	ref, k := runningModel(t, c, "s")
	c.Complete(ref, "done")
	h := svc.Hub()
	src.before = svc.RevokeLeadership
	w := h.Watch("s", map[Key]uint64{k: 9})
	if src.before != nil {
		t.Fatal("the watch read no state")
	}
	if got := drain(w); len(got) != 0 || w.Behind() {
		t.Fatalf("the closed watch got %+v, behind %v; want nothing, not behind", got, w.Behind())
	}
	if _, open := <-w.C(); open {
		t.Fatal("the watch's channel is open after its hub closed")
	}
}

// A watch whose buffer the live text filled before its ends were told is
// dropped as behind, as for any delta it has no room for: it resumes.
func TestResume_AWatchWithNoRoomForAnEndIsDroppedToResume(t *testing.T) {
	l := testLimits()
	l.WatcherBuffer = 1
	c, src, svc := leading(t, l)
	ref, ended := runningModel(t, c, "s")
	c.Complete(ref, "done")
	c.Send("s", "m1", "more")
	_, running := startModel(t, c, "s")
	h := svc.Hub()
	src.before = func() {
		// Room for one delta and for the one end: two texts fill it.
		for i, text := range []string{"a", "b"} {
			if _, err := h.Append("s", running, uint64(i), text); err != nil {
				t.Fatal(err)
			}
		}
	}
	w := h.Watch("s", map[Key]uint64{ended: 4})
	if src.before != nil {
		t.Fatal("the watch read no state")
	}
	if got := drain(w); textOf(got) != "ab" || len(got) != 2 || !w.Behind() {
		t.Fatalf("the full watch got %+v, behind %v; want the 2 texts, then dropped as behind", got, w.Behind())
	}
	if _, open := <-w.C(); open {
		t.Fatal("the dropped watch's channel is open")
	}
}
