package client

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// fakeOutputLeader is a leader's AppendOutputs: it holds each attempt's
// text, answers as the cluster does, and can hold a call (gate) or fail the
// next ones.
type fakeOutputLeader struct {
	dexv1.WorkerServiceClient

	mu      sync.Mutex
	held    map[string]string // by step id
	calls   []*dexv1.AppendOutputsRequest
	starts  []time.Time     // when each call came in
	fail    int             // the next calls that fail
	stop    map[string]bool // steps answered with stop
	gate    chan struct{}   // when set, a call waits for it
	entered chan struct{}
}

func newFakeOutputLeader() *fakeOutputLeader {
	return &fakeOutputLeader{held: map[string]string{}, stop: map[string]bool{}, entered: make(chan struct{}, 16)}
}

func (f *fakeOutputLeader) AppendOutputs(ctx context.Context, req *dexv1.AppendOutputsRequest, _ ...grpc.CallOption) (*dexv1.AppendOutputsResponse, error) {
	select {
	case f.entered <- struct{}{}:
	default:
	}
	f.mu.Lock()
	gate := f.gate
	f.starts = append(f.starts, time.Now())
	f.mu.Unlock()
	if gate != nil {
		<-gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, req.CloneVT())
	if f.fail > 0 {
		f.fail--
		return nil, errors.New("unavailable")
	}
	resp := &dexv1.AppendOutputsResponse{}
	for _, a := range req.Appends {
		step, text := a.Ref.StepId, f.held[a.Ref.StepId]
		switch {
		case f.stop[step]:
			resp.Answers = append(resp.Answers, &dexv1.AppendOutputResponse{Stop: true})
		case a.Offset != uint64(len(text)):
			resp.Answers = append(resp.Answers, &dexv1.AppendOutputResponse{NextOffset: uint64(len(text))})
		default:
			f.held[step] = text + a.Text
			resp.Answers = append(resp.Answers, &dexv1.AppendOutputResponse{NextOffset: uint64(len(f.held[step]))})
		}
	}
	return resp, nil
}

func (f *fakeOutputLeader) text(step string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.held[step]
}

func (f *fakeOutputLeader) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

func newTestSender(f *fakeOutputLeader) *outputSender {
	return &outputSender{svc: f, to: func(ctx context.Context) context.Context { return ctx }, pending: map[*outputStream]struct{}{}}
}

func ref(step string) *dexv1.AttemptRef {
	return &dexv1.AttemptRef{StepId: step, Attempt: 1, Token: "t"}
}

// An idle sender sends a delta at once; what several attempts stream while
// a call is in flight goes in one next call, each attempt's text whole.
func TestOutputSender_BatchesWhatIsStreamedDuringACall(t *testing.T) {
	f := newFakeOutputLeader()
	s := newTestSender(f)
	a, b, c := s.open(ref("s-s1")), s.open(ref("t-s1")), s.open(ref("u-s1"))

	f.gate = make(chan struct{})
	a.write("Hel")
	<-f.entered // the first call is in flight, held by the gate
	a.write("lo")
	b.write("Bon")
	b.write("jour")
	c.write("Hi")
	f.mu.Lock()
	gate := f.gate
	f.gate = nil
	f.mu.Unlock()
	close(gate)
	for _, o := range []*outputStream{a, b, c} {
		o.finish(5 * time.Second)
	}
	if got := [3]string{f.text("s-s1"), f.text("t-s1"), f.text("u-s1")}; got != [3]string{"Hello", "Bonjour", "Hi"} {
		t.Fatalf("the leader holds %q", got)
	}
	if n := f.callCount(); n != 2 {
		t.Fatalf("%d calls; want 2: the first delta, then everything streamed while it was in flight", n)
	}
	if second := f.calls[1]; len(second.Appends) != 3 {
		t.Fatalf("the second call carried %d appends; want one per attempt: %v", len(second.Appends), second)
	}
}

// Output waiting as a call returns goes in a call that starts no sooner
// than the spacing after the one before; output that comes to an idle
// sender (nothing waiting as its last call returned) goes at once.
func TestOutputSender_SpacesTheCallsOnlyWhileOutputWaits(t *testing.T) {
	f := newFakeOutputLeader()
	s := newTestSender(f)
	s.spacing = 300 * time.Millisecond
	o := s.open(ref("s-s1"))

	f.gate = make(chan struct{})
	o.write("a")
	<-f.entered
	o.write("b") // waits as the first call returns
	f.mu.Lock()
	gate := f.gate
	f.gate = nil
	f.mu.Unlock()
	close(gate)
	waitFor(t, func() bool { return f.text("s-s1") == "ab" })
	f.mu.Lock()
	gap := f.starts[1].Sub(f.starts[0])
	f.mu.Unlock()
	if gap < s.spacing {
		t.Fatalf("the second call started %v after the first; want at least %v", gap, s.spacing)
	}

	waitFor(t, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return !s.running })
	s.spacing = time.Hour // an idle sender does not wait it out
	o.write("c")
	o.finish(5 * time.Second)
	if got := f.text("s-s1"); got != "abc" {
		t.Fatalf("the leader holds %q; want \"abc\" at once from an idle sender", got)
	}
}

// A new leader holds nothing and answers offset 0: the sender resends the
// whole output. A failed call is repeated.
func TestOutputSender_ResendsFromTheOffsetTheLeaderWants(t *testing.T) {
	f := newFakeOutputLeader()
	s := newTestSender(f)
	o := s.open(ref("s-s1"))
	o.write("Hello")
	o.write(", ")
	waitFor(t, func() bool { return f.text("s-s1") == "Hello, " })

	f.mu.Lock()
	f.held = map[string]string{} // a takeover: the new leader holds nothing
	f.fail = 1
	f.mu.Unlock()
	o.write("world")
	o.finish(5 * time.Second)
	if got := f.text("s-s1"); got != "Hello, world" {
		t.Fatalf("the new leader holds %q; want the whole output", got)
	}
}

// An attempt the leader stops (it ended, or it is over the limit) sends no
// more; a stopped stream's later writes are dropped.
func TestOutputSender_StopsWhenTheLeaderSaysStop(t *testing.T) {
	f := newFakeOutputLeader()
	s := newTestSender(f)
	f.stop["s-s1"] = true
	o := s.open(ref("s-s1"))
	o.write("Hello")
	o.finish(5 * time.Second)
	calls := f.callCount()
	o.write("more")
	other := s.open(ref("t-s1"))
	other.write("x")
	other.finish(5 * time.Second)
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.calls[calls:] {
		for _, a := range c.Appends {
			if a.Ref.StepId == "s-s1" {
				t.Fatalf("a stopped attempt was sent again: %v", c)
			}
		}
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
