package client

import (
	"testing"
	"unicode/utf8"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

func outputEvent(step string, attempt uint32, offset uint64, text string) *dexv1.Event {
	return &dexv1.Event{Type: "output", StepId: step, Output: &dexv1.OutputDelta{Attempt: attempt, Offset: offset, Text: text}}
}

// A watch that resumes may be sent bytes it delivered already: each is
// delivered once, and the offsets it asks to resume from are where it is.
func TestLiveOffsets_DeliverEachByteOnce(t *testing.T) {
	l := newLiveOffsets()
	if e := l.trim(outputEvent("s-s1", 1, 0, "Hello")); e == nil || e.Output.Text != "Hello" {
		t.Fatalf("first delta: %v", e)
	}
	if e := l.trim(outputEvent("s-s1", 1, 0, "Hello")); e != nil {
		t.Fatalf("a repeat was delivered: %v", e)
	}
	e := l.trim(outputEvent("s-s1", 1, 3, "lo, world"))
	if e == nil || e.Output.Text != ", world" || e.Output.Offset != 5 {
		t.Fatalf("an overlapping delta: %v; want its new bytes at 5", e)
	}
	if e := l.trim(outputEvent("s-s1", 2, 0, "Hi")); e == nil || e.Output.Text != "Hi" {
		t.Fatalf("another attempt's first delta: %v", e)
	}
	ended := &dexv1.Event{Type: "output_ended", StepId: "s-s1", Output: &dexv1.OutputDelta{Attempt: 2, Offset: 2}}
	if e := l.trim(ended); e != ended {
		t.Fatal("an end marker was not delivered")
	}
	at := map[string]uint64{}
	for _, o := range l.request() {
		at[o.StepId+"#"+string(rune('0'+o.Attempt))] = o.Offset
	}
	if at["s-s1#1"] != 12 || at["s-s1#2"] != 2 {
		t.Fatalf("resume offsets %v; want attempt 1 at 12, attempt 2 at 2", at)
	}
}

// Stream without a Worker behind it (a handler's own test) does nothing.
func TestModelInputStream_WithoutAWorker(t *testing.T) {
	ModelInput{}.Stream("text")
}

func TestRuneCut_NeverSplitsACharacter(t *testing.T) {
	for _, text := range []string{"aé€😀z", "😀z", "€a"} {
		b := []byte(text)
		for n := 1; n < len(b); n++ {
			if c := runeCut(b, n); c > n || !utf8.Valid(b[:c]) || !utf8.Valid(b[c:]) {
				t.Fatalf("%q: cut at %d for %d: %q | %q", text, c, n, b[:c], b[c:])
			}
		}
	}
	// Less room than the first character: nothing fits.
	if c := runeCut([]byte("😀z"), 3); c != 0 {
		t.Fatalf("a 4-byte character in 3 bytes of room: cut at %d; want 0", c)
	}
}
