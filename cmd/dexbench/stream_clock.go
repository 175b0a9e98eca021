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

// attemptKey names one attempt's output.
type attemptKey struct {
	session, step string
	attempt       uint32
}

// deltaKey names one delta: its attempt and where its text starts in the
// attempt's output.
type deltaKey struct {
	attemptKey
	offset uint64
}

// sentDelta is one Stream call: its size and when it was made.
type sentDelta struct {
	size int
	at   time.Time
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
// when its last byte is.
type deltaClock struct {
	mu      sync.Mutex
	out     map[deltaKey]sentDelta // streamed, not yet received whole
	next    map[attemptKey]uint64  // each attempt's first offset not received whole
	samples []deltaSample
}

func newDeltaClock() *deltaClock {
	return &deltaClock{out: map[deltaKey]sentDelta{}, next: map[attemptKey]uint64{}}
}

// streamed notes that a handler streams size bytes of k at offset, at t.
func (c *deltaClock) streamed(k attemptKey, offset uint64, size int, t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.out[deltaKey{k, offset}] = sentDelta{size: size, at: t}
}

// received notes that a watcher got text of k at offset, at t, and returns
// how many deltas it completed.
func (c *deltaClock) received(k attemptKey, offset uint64, text string, t time.Time) int {
	end := offset + uint64(len(text))
	c.mu.Lock()
	defer c.mu.Unlock()
	pos, n := c.next[k], 0
	for {
		key := deltaKey{k, pos}
		d, ok := c.out[key]
		if !ok || pos+uint64(d.size) > end {
			break
		}
		c.samples = append(c.samples, deltaSample{sent: d.at, ms: ms(t.Sub(d.at))})
		delete(c.out, key)
		pos += uint64(d.size)
		n++
	}
	c.next[k] = pos
	return n
}

// between returns the latencies of the deltas streamed from from to to and
// received whole.
func (c *deltaClock) between(from, to time.Time) []float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []float64
	for _, s := range c.samples {
		if !s.sent.Before(from) && !s.sent.After(to) {
			out = append(out, s.ms)
		}
	}
	return out
}

// pending counts the deltas streamed and never received whole.
func (c *deltaClock) pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.out)
}

// streamModel streams each turn's deltas, spaced every apart, noting each
// in clock, and answers with their concatenation.
func streamModel(clock *deltaClock, deltas int, every time.Duration) client.ModelHandler {
	return client.ModelFuncs{
		Run: func(ctx context.Context, in client.ModelInput) (*dexv1.ModelOutput, error) {
			k := attemptKey{session: in.SessionID, step: in.StepID, attempt: in.Attempt}
			var out strings.Builder
			start := time.Now()
			for i := range deltas {
				if err := sleepUntil(ctx, start.Add(time.Duration(i)*every)); err != nil {
					return nil, err
				}
				text := deltaText(i)
				clock.streamed(k, uint64(out.Len()), len(text), time.Now())
				in.Stream(text)
				out.WriteString(text)
			}
			return &dexv1.ModelOutput{Text: out.String()}, nil
		},
		CompactFunc: func(context.Context, client.ModelInput) (string, error) { return "earlier stream turns", nil },
	}
}

func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}
