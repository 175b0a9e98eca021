package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// The stream sessions' model: numbered deltas on a schedule, each one's
// send time kept for the latency of its arrival at the watcher.

// deltaText is the text of a turn's delta i: short, and numbered so that a
// gap or a repeat shows in the text.
func deltaText(i int) string { return fmt.Sprintf("delta %04d; ", i) }

// deltaTexts is deltaText(0) … deltaText(n-1), made once: the model streams
// the same texts every turn.
func deltaTexts(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = deltaText(i)
	}
	return out
}

// attemptKey names one attempt's output.
type attemptKey struct {
	session, step string
	attempt       uint32
}

// sentDelta is one Stream call: where its text starts, its size and when it
// was made.
type sentDelta struct {
	offset uint64
	size   int
	at     time.Time
}

// deltaSample is one delta received whole: when its handler streamed it and
// how long it took to reach the watcher, in ms.
type deltaSample struct {
	sent time.Time
	ms   float64
}

// deltaClock times the deltas from the stream Workers' model handler (sent:
// just before ModelInput.Stream) to the watchers (received). The Worker
// library coalesces the deltas streamed while a call is in flight, so one
// piece a watcher receives may hold several: a delta counts as received
// when its last byte is. It keeps each session apart (sessionClock), so
// that the handlers and watchers of different sessions share no lock.
type deltaClock struct {
	mu       sync.Mutex
	sessions map[string]*sessionClock
}

func newDeltaClock() *deltaClock { return &deltaClock{sessions: map[string]*sessionClock{}} }

// session is one session's clock, made on first use.
func (c *deltaClock) session(id string) *sessionClock {
	c.mu.Lock()
	defer c.mu.Unlock()
	sc := c.sessions[id]
	if sc == nil {
		sc = &sessionClock{attempts: map[textKey]*attemptClock{}}
		c.sessions[id] = sc
	}
	return sc
}

// streamed notes that a handler streams size bytes of k at offset, at t.
func (c *deltaClock) streamed(k attemptKey, offset uint64, size int, t time.Time) {
	c.session(k.session).streamed(textKey{k.step, k.attempt}, offset, size, t)
}

// received notes that a watcher got text of k at offset, at t, and returns
// how many deltas it completed.
func (c *deltaClock) received(k attemptKey, offset uint64, text string, t time.Time) int {
	return c.session(k.session).received(textKey{k.step, k.attempt}, offset, text, t)
}

// between returns the latencies of the deltas streamed from from to to and
// received whole.
func (c *deltaClock) between(from, to time.Time) []float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []float64
	for _, sc := range c.sessions {
		sc.mu.Lock()
		for _, s := range sc.samples {
			if !s.sent.Before(from) && !s.sent.After(to) {
				out = append(out, s.ms)
			}
		}
		sc.mu.Unlock()
	}
	return out
}

// pending counts the deltas streamed and never received whole.
func (c *deltaClock) pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, sc := range c.sessions {
		sc.mu.Lock()
		for _, a := range sc.attempts {
			n += len(a.sent) - a.next
		}
		sc.mu.Unlock()
	}
	return n
}

// sessionClock is one session's share of the deltaClock.
type sessionClock struct {
	mu       sync.Mutex
	attempts map[textKey]*attemptClock
	samples  []deltaSample
}

// attemptClock is one attempt's deltas in the order streamed (by offset),
// and the first not yet received whole.
type attemptClock struct {
	sent []sentDelta
	next int
}

func (c *sessionClock) streamed(k textKey, offset uint64, size int, t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a := c.attempts[k]
	if a == nil {
		a = &attemptClock{}
		c.attempts[k] = a
	}
	a.sent = append(a.sent, sentDelta{offset: offset, size: size, at: t})
}

func (c *sessionClock) received(k textKey, offset uint64, text string, t time.Time) int {
	end := offset + uint64(len(text))
	c.mu.Lock()
	defer c.mu.Unlock()
	a := c.attempts[k]
	if a == nil {
		return 0
	}
	n := 0
	for ; a.next < len(a.sent); a.next++ {
		d := a.sent[a.next]
		if d.offset+uint64(d.size) > end {
			break
		}
		c.samples = append(c.samples, deltaSample{sent: d.at, ms: ms(t.Sub(d.at))})
		n++
	}
	return n
}

// streamModel streams each turn's deltas, spaced every apart, noting each
// in clock, and answers with their concatenation.
func streamModel(clock *deltaClock, deltas int, every time.Duration) client.ModelHandler {
	texts := deltaTexts(deltas)
	return client.ModelFuncs{
		Run: func(ctx context.Context, in client.ModelInput) (*dexv1.ModelOutput, error) {
			sc, k := clock.session(in.SessionID), textKey{step: in.StepID, attempt: in.Attempt}
			var out strings.Builder
			timer := time.NewTimer(time.Hour)
			timer.Stop()
			start := time.Now()
			for i := range deltas {
				if err := sleepUntil(ctx, timer, start.Add(time.Duration(i)*every)); err != nil {
					return nil, err
				}
				text := texts[i]
				sc.streamed(k, uint64(out.Len()), len(text), time.Now())
				in.Stream(text)
				out.WriteString(text)
			}
			return &dexv1.ModelOutput{Text: out.String()}, nil
		},
		CompactFunc: func(context.Context, client.ModelInput) (string, error) { return "earlier stream turns", nil },
	}
}

// sleepUntil waits until t on timer, which it resets (one timer a turn, not
// one a delta).
func sleepUntil(ctx context.Context, timer *time.Timer, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	timer.Reset(d)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}
