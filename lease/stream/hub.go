// Package stream holds the live output of running attempts on the leader
// (docs/design/streaming.md): a Worker appends its model's deltas, numbered
// by byte offset within (Step, attempt); every watcher of the session gets
// them at once, from any offset the hub still holds. Nothing here is
// replicated: the committed result is the source of truth, and a new leader
// starts empty and asks each Worker to resend from offset 0.
package stream

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// Key names one attempt of a Step.
type Key struct {
	Step    string
	Attempt uint32
}

// Kind is what a Delta tells a watcher.
type Kind int

const (
	// Text: Text is the attempt's output at Offset.
	Text Kind = iota + 1
	// Ended: the attempt's output is whole; its committed result replaces
	// the stream (Offset is its length).
	Ended
	// Abandoned: the attempt failed or expired; what it streamed is not the
	// Step's output (a retry streams afresh from offset 0 of a new attempt).
	Abandoned
)

// Delta is one piece of a session's live output.
type Delta struct {
	Session string
	Key
	Kind   Kind
	Offset uint64
	Text   string
}

// Limits bound the hub's memory.
type Limits struct {
	// PerAttempt bounds one attempt's held output; Total all of it.
	PerAttempt int
	Total      int
	// Linger is how long an ended attempt's output stays for a watcher
	// that resumes.
	Linger time.Duration
	// WatcherBuffer is how many deltas a watcher may fall behind before it
	// is dropped (and must resume from its offsets).
	WatcherBuffer int
}

// DefaultLimits are dexd's.
var DefaultLimits = Limits{PerAttempt: 1 << 20, Total: 256 << 20, Linger: 30 * time.Second, WatcherBuffer: 1024}

// ErrOverLimit: the attempt's (or the hub's) output is at its limit; the
// Worker stops streaming it, and its result carries the whole output.
var ErrOverLimit = errors.New("live output over its limit: the rest comes with the result")

// ErrEnded: the attempt's output already ended.
var ErrEnded = errors.New("the attempt's output already ended")

// output is one attempt's held output.
type output struct {
	session string
	text    []byte
	end     Kind // 0 while it streams
	linger  *time.Timer
}

// Hub is one leader's live output, for one partition.
type Hub struct {
	limits Limits

	mu      sync.Mutex
	outputs map[Key]*output
	// bySession indexes outputs, so that a watch reads its session's alone.
	bySession map[string]map[Key]*output
	total     int
	watchers  map[string]map[*Watcher]struct{} // by session

	// src, when set (the Service's hubs), is the replicated state a watch
	// that resumes reads for the attempts the hub holds nothing of
	// (resume.go).
	src StateSource
}

// NewHub returns an empty hub.
func NewHub(l Limits) *Hub {
	return &Hub{limits: l, outputs: map[Key]*output{}, bySession: map[string]map[Key]*output{}, watchers: map[string]map[*Watcher]struct{}{}}
}

// Append adds text at offset to an attempt's output and relays it. It
// returns the offset the hub wants next: offset+len(text) when it took the
// text, else the end of what it holds (the Worker resends from there; 0 for
// an attempt it does not know, as after a takeover).
func (h *Hub) Append(session string, k Key, offset uint64, text string) (uint64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	o := h.outputs[k]
	if o == nil {
		// The caller saw the attempt running; an end applied since then
		// found nothing here to end, so output taken now would never end.
		if h.src != nil && endedInState(h.src.State(), session, k) != 0 {
			return 0, ErrEnded
		}
		o = &output{session: session}
		h.outputs[k] = o
		if h.bySession[session] == nil {
			h.bySession[session] = map[Key]*output{}
		}
		h.bySession[session][k] = o
	}
	if o.end != 0 {
		return uint64(len(o.text)), ErrEnded
	}
	if o.session != session {
		return 0, fmt.Errorf("attempt %s/%d streams for session %s, not %s", k.Step, k.Attempt, o.session, session)
	}
	held := uint64(len(o.text))
	if offset != held {
		return held, nil
	}
	if len(o.text)+len(text) > h.limits.PerAttempt || h.total+len(text) > h.limits.Total {
		return held, ErrOverLimit
	}
	o.text = append(o.text, text...)
	h.total += len(text)
	h.relay(Delta{Session: session, Key: k, Kind: Text, Offset: offset, Text: text})
	return offset + uint64(len(text)), nil
}

// End marks an attempt's output whole (abandoned: the attempt failed) and
// tells its watchers; it is dropped after the linger. An attempt of session
// this hub holds nothing of (its output all reached an earlier leader, and
// its Worker had nothing left to resend) is told to the watchers that
// resumed it, each at the offset it holds. A watch is told the end once: a
// watcher told it, here or by its own watch after the end (resume.go),
// holds the attempt in from no more.
func (h *Hub) End(session string, k Key, abandoned bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	kind := Ended
	if abandoned {
		kind = Abandoned
	}
	o := h.outputs[k]
	if o == nil {
		h.endUnheld(session, k, kind)
		return
	}
	if o.end != 0 {
		return
	}
	o.end = kind
	h.relay(Delta{Session: o.session, Key: k, Kind: o.end, Offset: uint64(len(o.text))})
	for w := range h.watchers[o.session] {
		delete(w.from, k)
	}
	o.linger = time.AfterFunc(h.limits.Linger, func() { h.drop(k, o) })
}

// endUnheld tells the end of an attempt the hub holds nothing of to each
// of the session's watchers that resumed it.
func (h *Hub) endUnheld(session string, k Key, kind Kind) {
	for w := range h.watchers[session] {
		at, resumed := w.from[k]
		if !resumed {
			continue
		}
		delete(w.from, k)
		select {
		case w.ch <- Delta{Session: session, Key: k, Kind: kind, Offset: at}:
		default:
			h.dropWatcher(w, true)
		}
	}
}

func (h *Hub) drop(k Key, o *output) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.outputs[k] == o {
		delete(h.outputs, k)
		if byKey := h.bySession[o.session]; byKey != nil {
			if delete(byKey, k); len(byKey) == 0 {
				delete(h.bySession, o.session)
			}
		}
		h.total -= len(o.text)
	}
}

// Close drops everything and every watcher (the leadership ended).
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, o := range h.outputs {
		if o.linger != nil {
			o.linger.Stop()
		}
		delete(h.outputs, k)
	}
	clear(h.bySession)
	h.total = 0
	for _, ws := range h.watchers {
		for w := range ws {
			h.dropWatcher(w, false)
		}
	}
}

// relay hands d to the session's watchers; one that is too far behind is
// dropped.
func (h *Hub) relay(d Delta) {
	for w := range h.watchers[d.Session] {
		select {
		case w.ch <- d:
		default:
			h.dropWatcher(w, true)
		}
	}
}
