package stream

import "sort"

// Watcher is one reader of a session's live output.
type Watcher struct {
	h       *Hub
	session string
	ch      chan Delta
	// from is where the watch resumed each attempt: an attempt that ends
	// with nothing of it on this hub is told at that offset.
	from map[Key]uint64
	// Behind: it fell too far behind and was dropped; its reader resumes
	// from the offsets it holds.
	behind bool
	closed bool
}

// Watch subscribes to a session's live output. It first yields what the
// hub holds of each of the session's attempts from the offset in from (0
// for an attempt not in it; an attempt at or past its end yields only its
// end, if it ended), in Step and attempt order, then every new delta.
func (h *Hub) Watch(session string, from map[Key]uint64) *Watcher {
	h.mu.Lock()
	defer h.mu.Unlock()
	w := &Watcher{h: h, session: session, ch: make(chan Delta, h.limits.WatcherBuffer), from: from}
	var keys []Key
	for k := range h.bySession[session] {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Step != keys[j].Step {
			return keys[i].Step < keys[j].Step
		}
		return keys[i].Attempt < keys[j].Attempt
	})
	for _, k := range keys {
		o := h.outputs[k]
		at := min(from[k], uint64(len(o.text)))
		backlog := []Delta{}
		if at < uint64(len(o.text)) {
			backlog = append(backlog, Delta{Session: session, Key: k, Kind: Text, Offset: at, Text: string(o.text[at:])})
		}
		if o.end != 0 {
			backlog = append(backlog, Delta{Session: session, Key: k, Kind: o.end, Offset: uint64(len(o.text))})
		}
		for _, d := range backlog {
			select {
			case w.ch <- d:
			default:
				w.behind, w.closed = true, true
				close(w.ch)
				return w
			}
		}
	}
	if h.watchers[session] == nil {
		h.watchers[session] = map[*Watcher]struct{}{}
	}
	h.watchers[session][w] = struct{}{}
	return w
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
