package stream

import (
	"errors"
	"strings"
	"testing"
	"time"
)

var k1 = Key{Step: "s1-s3", Attempt: 1}

func testLimits() Limits {
	return Limits{PerAttempt: 64, Total: 100, Linger: time.Hour, WatcherBuffer: 16}
}

// drain reads what the watcher holds now.
func drain(w *Watcher) []Delta {
	var out []Delta
	for {
		select {
		case d, ok := <-w.C():
			if !ok {
				return out
			}
			out = append(out, d)
		default:
			return out
		}
	}
}

func textOf(ds []Delta) string {
	var b strings.Builder
	for _, d := range ds {
		if d.Kind == Text {
			b.WriteString(d.Text)
		}
	}
	return b.String()
}

func mustAppend(t *testing.T, h *Hub, k Key, offset uint64, text string) {
	t.Helper()
	if next, err := h.Append("s1", k, offset, text); err != nil || next != offset+uint64(len(text)) {
		t.Fatalf("append %q at %d: next %d, %v", text, offset, next, err)
	}
}

func TestHub_WatchersGetEachDeltaOnceInOrder(t *testing.T) {
	h := NewHub(testLimits())
	w := h.Watch("s1", nil)
	other := h.Watch("s2", nil)
	mustAppend(t, h, k1, 0, "Hello")
	mustAppend(t, h, k1, 5, ", world")
	got := drain(w)
	if textOf(got) != "Hello, world" || got[1].Offset != 5 {
		t.Fatalf("watcher got %+v", got)
	}
	if d := drain(other); len(d) != 0 {
		t.Fatalf("another session's watcher got %+v", d)
	}
}

func TestHub_AWrongOffsetIsAnsweredWithTheHeldEnd(t *testing.T) {
	h := NewHub(testLimits())
	mustAppend(t, h, k1, 0, "abc")
	if next, err := h.Append("s1", k1, 7, "zzz"); err != nil || next != 3 {
		t.Fatalf("append past the end: next %d, %v; want 3 (resend from there)", next, err)
	}
	if next, err := h.Append("s1", k1, 1, "bc"); err != nil || next != 3 {
		t.Fatalf("append of bytes held already: next %d, %v; want 3", next, err)
	}
	// A new leader's hub knows nothing: the Worker resends from 0.
	fresh := NewHub(testLimits())
	if next, _ := fresh.Append("s1", k1, 3, "def"); next != 0 {
		t.Fatalf("a fresh hub wants offset %d; want 0", next)
	}
	if _, err := h.Append("s2", k1, 3, "x"); err == nil {
		t.Fatal("an attempt's output was appended to under another session")
	}
}

func TestHub_AWatcherResumesFromItsOffset(t *testing.T) {
	h := NewHub(testLimits())
	mustAppend(t, h, k1, 0, "Hello")
	mustAppend(t, h, k1, 5, ", world")
	w := h.Watch("s1", map[Key]uint64{k1: 7})
	mustAppend(t, h, k1, 12, "!")
	got := drain(w)
	if textOf(got) != "world!" || got[0].Offset != 7 {
		t.Fatalf("resumed at 7: %+v", got)
	}
	// From 0 by default, and past the end gives nothing of the text.
	if got := textOf(drain(h.Watch("s1", nil))); got != "Hello, world!" {
		t.Fatalf("from the start: %q", got)
	}
	if got := drain(h.Watch("s1", map[Key]uint64{k1: 99})); len(got) != 0 {
		t.Fatalf("from past the end: %+v", got)
	}
}

func TestHub_EndAndAbandonAreTold(t *testing.T) {
	h := NewHub(testLimits())
	w := h.Watch("s1", nil)
	mustAppend(t, h, k1, 0, "partial")
	h.End("s1", k1, true)
	k2 := Key{Step: k1.Step, Attempt: 2}
	mustAppend(t, h, k2, 0, "whole")
	h.End("s1", k2, false)
	got := drain(w)
	if len(got) != 4 || got[1].Kind != Abandoned || got[1].Offset != 7 || got[3].Kind != Ended || got[3].Key != k2 {
		t.Fatalf("deltas %+v; want attempt 1's text then abandoned, attempt 2's text then ended", got)
	}
	if _, err := h.Append("s1", k2, 5, "more"); !errors.Is(err, ErrEnded) {
		t.Fatalf("append after the end: %v", err)
	}
	// A late watcher gets both outputs and how each ended, in attempt order.
	late := drain(h.Watch("s1", map[Key]uint64{k1: 7}))
	if len(late) != 3 || late[0].Kind != Abandoned || late[1].Text != "whole" || late[2].Kind != Ended {
		t.Fatalf("late watcher %+v", late)
	}
}

func TestHub_OutputIsBounded(t *testing.T) {
	h := NewHub(testLimits())
	w := h.Watch("s1", nil)
	mustAppend(t, h, k1, 0, strings.Repeat("a", 60))
	if next, err := h.Append("s1", k1, 60, "12345"); !errors.Is(err, ErrOverLimit) || next != 60 {
		t.Fatalf("over the attempt's limit: next %d, %v", next, err)
	}
	k2 := Key{Step: "s1-s4", Attempt: 1}
	if _, err := h.Append("s1", k2, 0, strings.Repeat("b", 41)); !errors.Is(err, ErrOverLimit) {
		t.Fatalf("over the hub's limit: %v", err)
	}
	if got := textOf(drain(w)); len(got) != 60 {
		t.Fatalf("relayed %d bytes; want only the 60 taken", len(got))
	}
}

func TestHub_ASlowWatcherIsDroppedToResume(t *testing.T) {
	l := testLimits()
	l.WatcherBuffer = 2
	h := NewHub(l)
	slow, fast := h.Watch("s1", nil), h.Watch("s1", nil)
	got := []Delta{}
	for i, s := range []string{"a", "b", "c"} {
		mustAppend(t, h, k1, uint64(i), s)
		got = append(got, drain(fast)...)
	}
	if textOf(got) != "abc" {
		t.Fatalf("the reading watcher got %q", textOf(got))
	}
	if d := drain(slow); textOf(d) != "ab" || !slow.Behind() {
		t.Fatalf("the slow watcher: %+v, behind %v; want its 2 deltas, then dropped as behind", d, slow.Behind())
	}
	if _, ok := <-slow.C(); ok {
		t.Fatal("the dropped watcher's channel is open")
	}
}

func TestHub_EndedOutputGoesAfterTheLinger(t *testing.T) {
	l := testLimits()
	l.Linger = 10 * time.Millisecond
	h := NewHub(l)
	mustAppend(t, h, k1, 0, "done")
	h.End("s1", k1, false)
	deadline := time.Now().Add(5 * time.Second)
	for {
		h.mu.Lock()
		n, total := len(h.outputs), h.total
		h.mu.Unlock()
		if n == 0 && total == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d outputs, %d bytes still held after the linger", n, total)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestHub_CloseEndsEveryWatcher(t *testing.T) {
	h := NewHub(testLimits())
	w := h.Watch("s1", nil)
	mustAppend(t, h, k1, 0, "x")
	h.Close()
	drain(w)
	if _, ok := <-w.C(); ok || w.Behind() {
		t.Fatalf("after Close: open %v, behind %v; want closed, not behind", ok, w.Behind())
	}
	w.Close() // a second close is harmless
}

// A watch reads its own session's outputs only, and an output dropped after
// its linger leaves the session's index with it.
func TestHub_WatchReadsItsSessionAndTheIndexEmptiesAfterTheLinger(t *testing.T) {
	h := NewHub(Limits{PerAttempt: 1 << 10, Total: 1 << 20, Linger: 10 * time.Millisecond, WatcherBuffer: 16})
	a, b := Key{Step: "a-s1", Attempt: 1}, Key{Step: "b-s1", Attempt: 1}
	if _, err := h.Append("a", a, 0, "for a"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Append("b", b, 0, "for b"); err != nil {
		t.Fatal(err)
	}
	w := h.Watch("a", nil)
	if d := <-w.C(); d.Key != a || d.Text != "for a" {
		t.Fatalf("the watch of a yielded %+v", d)
	}
	select {
	case d := <-w.C():
		t.Fatalf("the watch of a yielded another session's %+v", d)
	default:
	}
	w.Close()
	h.End("a", a, false)
	h.End("b", b, true)
	deadline := time.Now().Add(5 * time.Second)
	for {
		h.mu.Lock()
		left := len(h.outputs) + len(h.bySession)
		h.mu.Unlock()
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d outputs or session entries left after the linger", left)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// After a takeover the new leader's hub may hold nothing of an attempt
// whose output all reached the old leader: its end is still told to each
// watcher that resumed it, at the offset that watcher holds, and to no
// other watcher.
func TestHub_TheEndOfAnAttemptItNeverHeldIsToldToWhoResumedIt(t *testing.T) {
	h := NewHub(testLimits())
	resumed := h.Watch("s1", map[Key]uint64{k1: 120})
	fresh := h.Watch("s1", nil)
	other := h.Watch("s2", map[Key]uint64{k1: 120})
	h.End("s1", k1, false)
	got := drain(resumed)
	if len(got) != 1 || got[0].Kind != Ended || got[0].Key != k1 || got[0].Offset != 120 || got[0].Session != "s1" {
		t.Fatalf("the resumed watcher got %+v; want the end of %v at its offset 120", got, k1)
	}
	if got := drain(fresh); len(got) != 0 {
		t.Fatalf("a watcher that never saw the attempt got %+v", got)
	}
	if got := drain(other); len(got) != 0 {
		t.Fatalf("another session's watcher got %+v", got)
	}
	k2 := Key{Step: k1.Step, Attempt: 2}
	w := h.Watch("s1", map[Key]uint64{k2: 40})
	h.End("s1", k2, true)
	if got := drain(w); len(got) != 1 || got[0].Kind != Abandoned || got[0].Offset != 40 {
		t.Fatalf("an abandoned attempt: %+v", got)
	}
	// Nothing is kept for an attempt it never held.
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.outputs) != 0 {
		t.Fatalf("the hub holds %d outputs", len(h.outputs))
	}
}
