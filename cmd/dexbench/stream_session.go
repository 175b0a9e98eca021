package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// One stream session's watcher: what it received of each attempt, and the
// check of that text against the committed output.

// textKey names one attempt's output within a session.
type textKey struct {
	step    string
	attempt uint32
}

// streamSession is one stream session as its watcher sees it: the watch's
// callback writes it, the session's driver waits on it.
type streamSession struct {
	id string

	mu        sync.Mutex
	events    int                          // events received, of any type
	turns     int                          // turn_completed events
	texts     map[textKey]*strings.Builder // each attempt's output as received
	streamed  map[string]bool              // Steps with output received
	open      map[textKey]bool             // attempts with output and no end marker yet
	ended     map[string]uint32            // Step → its attempt whose output ended (the result committed)
	abandoned int                          // attempts whose output was abandoned
	problems  []string                     // deltas out of place
	stopped   error                        // the session errored or paused, or the watch ended
	wake      chan struct{}
	clock     *sessionClock // the session's share of the deltaClock, once it got output
}

func newStreamSession(id string) *streamSession {
	return &streamSession{id: id, texts: map[textKey]*strings.Builder{}, streamed: map[string]bool{}, open: map[textKey]bool{}, ended: map[string]uint32{},
		wake: make(chan struct{}, 1)}
}

// observe takes one event of the session's watch, received at t.
// Its waiters (await) are woken only by what their conditions read: a
// delta that adds to an attempt's text already seen wakes none.
func (s *streamSession) observe(e *dexv1.Event, t time.Time, clock *deltaClock) {
	s.mu.Lock()
	s.events++
	wake := true
	switch e.Type {
	case "output":
		k := textKey{e.StepId, e.Output.Attempt}
		b := s.texts[k]
		if b == nil {
			b = &strings.Builder{}
			s.texts[k] = b
			s.open[k] = true
			s.streamed[e.StepId] = true
		} else {
			wake = false
		}
		if e.Output.Offset != uint64(b.Len()) {
			s.problems = append(s.problems, fmt.Sprintf("step %s attempt %d: a delta at offset %d after %d bytes", e.StepId, e.Output.Attempt, e.Output.Offset, b.Len()))
		}
		b.WriteString(e.Output.Text)
		if s.clock == nil {
			s.clock = clock.session(s.id)
		}
		s.clock.received(k, e.Output.Offset, e.Output.Text, t)
	case "output_ended":
		delete(s.open, textKey{e.StepId, e.Output.GetAttempt()})
		s.ended[e.StepId] = e.Output.GetAttempt()
	case "output_abandoned":
		delete(s.open, textKey{e.StepId, e.Output.GetAttempt()})
		s.abandoned++
	case "turn_completed":
		s.turns++
	case "session_errored", "session_paused":
		s.stopped = fmt.Errorf("%s: %s", strings.TrimPrefix(e.Type, "session_"), e.Detail)
	}
	s.mu.Unlock()
	if wake {
		notify(s.wake)
	}
}

// fail ends the waits on the session with err.
func (s *streamSession) fail(err error) {
	s.mu.Lock()
	if s.stopped == nil {
		s.stopped = err
	}
	s.mu.Unlock()
	notify(s.wake)
}

func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// await waits until cond holds (read under the session's lock).
func (s *streamSession) await(ctx context.Context, what string, cond func() bool) error {
	for {
		s.mu.Lock()
		ok, stopped := cond(), s.stopped
		s.mu.Unlock()
		if ok {
			return nil
		}
		if stopped != nil {
			return fmt.Errorf("session %s: %w", s.id, stopped)
		}
		select {
		case <-s.wake:
		case <-ctx.Done():
			return fmt.Errorf("session %s: waiting for %s: %w", s.id, what, ctx.Err())
		}
	}
}

// sendTurn sends the message that starts the session's turn k.
func (s *streamSession) sendTurn(ctx context.Context, cl *client.Client, k int) error {
	if _, err := cl.SendMessage(ctx, s.id, fmt.Sprintf("turn %d", k), fmt.Sprintf("%s-turn-%d", s.id, k)); err != nil {
		return fmt.Errorf("session %s: send turn %d: %w", s.id, k, err)
	}
	return nil
}

// finishTurn waits until turn k completed and the watcher was told, of each
// of the k Steps so far (a turn is one model Step), that its output ended,
// and of every other attempt it got output of that it was abandoned. The
// end marker and turn_completed may come in either order.
func (s *streamSession) finishTurn(ctx context.Context, k int) error {
	return s.await(ctx, fmt.Sprintf("turn %d to complete and its output to end", k), func() bool {
		return s.turns >= k && len(s.ended) >= k && len(s.open) == 0
	})
}

// received is the text the watcher got of each attempt.
func (s *streamSession) received() (texts map[textKey]string, ended map[string]uint32, problems []string, abandoned int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	texts = map[textKey]string{}
	for k, b := range s.texts {
		texts[k] = b.String()
	}
	return texts, maps.Clone(s.ended), slices.Clone(s.problems), s.abandoned
}

// compareStreamed checks one session's streamed output against what it
// committed (each model Step's assistant text): the attempt whose output
// ended must have reached the watcher whole and equal. It returns how many
// Steps it checked and what differs.
func compareStreamed(session string, committed map[string]string, texts map[textKey]string, ended map[string]uint32) (checked int, problems []string) {
	for _, step := range slices.Sorted(maps.Keys(committed)) {
		want := committed[step]
		attempt, ok := ended[step]
		if !ok {
			problems = append(problems, fmt.Sprintf("session %s step %s: committed, but its watcher was never told its output ended", session, step))
			continue
		}
		checked++
		got, ok := texts[textKey{step, attempt}]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("session %s step %s: its watcher got no output of attempt %d, whose result committed", session, step, attempt))
		case got != want:
			problems = append(problems, fmt.Sprintf("session %s step %s attempt %d: its watcher got %d bytes, the committed output is %d (first difference at byte %d)",
				session, step, attempt, len(got), len(want), firstDifference(got, want)))
		}
	}
	for _, step := range slices.Sorted(maps.Keys(ended)) {
		if _, ok := committed[step]; !ok {
			problems = append(problems, fmt.Sprintf("session %s step %s: its output ended, but no output of it is committed", session, step))
		}
	}
	return checked, problems
}

func firstDifference(a, b string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// committedOutputs is the assistant text of each model Step of a session.
func committedOutputs(gs *dexv1.GetSessionResponse) map[string]string {
	out := map[string]string{}
	for _, h := range gs.GetSession().GetHistory() {
		if h.Kind == dexv1.HistoryKind_HISTORY_KIND_ASSISTANT && h.StepId != "" {
			out[h.StepId] = h.Text
		}
	}
	return out
}
