package stream

import (
	"maps"
	"sort"
)

// Watcher is one reader of a session's live output.
type Watcher struct {
	h       *Hub
	session string
	ch      chan Delta
	// from is where the watch resumed each attempt whose end it has not
	// been told: an attempt that ends with nothing of it on this hub is
	// told at that offset, and taken out.
	from map[Key]uint64
	// Behind: it fell too far behind and was dropped; its reader resumes
	// from the offsets it holds.
	behind bool
	closed bool
}

// Watch subscribes to a session's live output. It first yields what the
// hub holds of each of the session's attempts from the offset in from (0
// for an attempt not in it; an attempt at or past its end yields only its
// end, if it ended), in Step and attempt order, then every new delta. An
// attempt in from that the hub holds nothing of and that has ended by the
// replicated state (its output all reached an earlier leader, or it ended
// longer ago than the linger) yields its end at once, at the offset in
// from (resume.go).
func (h *Hub) Watch(session string, from map[Key]uint64) *Watcher {
	w, unheld := h.register(session, from)
	if len(unheld) > 0 && h.src != nil {
		h.tellEndedBefore(w, unheld)
	}
	return w
}

// register yields what the hub holds of the session from the offsets in
// from and adds the watcher; it also returns the attempts in from the hub
// holds nothing of (none if the watcher was dropped at once).
func (h *Hub) register(session string, from map[Key]uint64) (*Watcher, []Key) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var unheld []Key
	for k := range from {
		if h.outputs[k] == nil {
			unheld = append(unheld, k)
		}
	}
	// Each attempt held by nothing here may yield its end once, besides
	// the buffer: a watch that resumes many ended attempts is not dropped
	// as behind for their ends (to resume with them, and be dropped again).
	w := &Watcher{h: h, session: session, ch: make(chan Delta, h.limits.WatcherBuffer+len(unheld)), from: maps.Clone(from)}
	var keys []Key
	for k := range h.bySession[session] {
		keys = append(keys, k)
	}
	sortKeys(keys)
	for _, k := range keys {
		o := h.outputs[k]
		at := min(from[k], uint64(len(o.text)))
		backlog := []Delta{}
		if at < uint64(len(o.text)) {
			backlog = append(backlog, Delta{Session: session, Key: k, Kind: Text, Offset: at, Text: string(o.text[at:])})
		}
		if o.end != 0 {
			backlog = append(backlog, Delta{Session: session, Key: k, Kind: o.end, Offset: uint64(len(o.text))})
			delete(w.from, k)
		}
		for _, d := range backlog {
			select {
			case w.ch <- d:
			default:
				w.behind, w.closed = true, true
				close(w.ch)
				return w, nil
			}
		}
	}
	if h.watchers[session] == nil {
		h.watchers[session] = map[*Watcher]struct{}{}
	}
	h.watchers[session][w] = struct{}{}
	return w, unheld
}

// sortKeys puts keys in Step and attempt order.
func sortKeys(keys []Key) {
	sort.Slice(keys, func(i, j int) bool { return keyLess(keys[i], keys[j]) })
}

func keyLess(a, b Key) bool {
	if a.Step != b.Step {
		return a.Step < b.Step
	}
	return a.Attempt < b.Attempt
}

// C yields the deltas; it is closed when the watcher is dropped or closed.
func (w *Watcher) C() <-chan Delta { return w.ch }

// Behind reports, once C is closed, whether the watcher was dropped for
// falling behind (rather than closed, or its leader stepping down).
func (w *Watcher) Behind() bool {
	w.h.mu.Lock()
	defer w.h.mu.Unlock()
	return w.behind
}

// Close ends the watch.
func (w *Watcher) Close() {
	w.h.mu.Lock()
	defer w.h.mu.Unlock()
	w.h.dropWatcher(w, false)
}

func (h *Hub) dropWatcher(w *Watcher, behind bool) {
	if w.closed {
		return
	}
	w.closed, w.behind = true, behind
	close(w.ch)
	if ws := h.watchers[w.session]; ws != nil {
		if delete(ws, w); len(ws) == 0 {
			delete(h.watchers, w.session)
		}
	}
}
