package server

import (
	"strings"
	"testing"

	livestream "github.com/dexhq/dex/lease/stream"
)

func text(step string, attempt uint32, offset uint64, t string) livestream.Delta {
	return livestream.Delta{Session: "s1", Key: livestream.Key{Step: step, Attempt: attempt}, Kind: livestream.Text, Offset: offset, Text: t}
}

func queued(ds ...livestream.Delta) chan livestream.Delta {
	ch := make(chan livestream.Delta, len(ds)+1)
	for _, d := range ds {
		ch <- d
	}
	return ch
}

// A watcher behind on one attempt gets its waiting text in one send; the
// other attempts' text, an end, or a gap start a new one, in order.
func TestCoalescedMergesOneAttemptsWaitingText(t *testing.T) {
	end := livestream.Delta{Session: "s1", Key: livestream.Key{Step: "a", Attempt: 1}, Kind: livestream.Ended, Offset: 9}
	more := queued(
		text("a", 1, 3, "def"), text("a", 1, 6, "ghi"),
		text("b", 1, 0, "xy"),
		text("a", 1, 9, "j"), // after b: a new run
		end,
		text("a", 2, 5, "late"), // not contiguous with anything before it
	)
	got, closed := coalesced(nil, text("a", 1, 0, "abc"), more)
	want := []livestream.Delta{
		text("a", 1, 0, "abcdefghi"), text("b", 1, 0, "xy"), text("a", 1, 9, "j"), end, text("a", 2, 5, "late"),
	}
	if closed || len(got) != len(want) {
		t.Fatalf("got %d deltas (closed %v): %+v; want %+v", len(got), closed, got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("delta %d: %+v; want %+v", i, got[i], want[i])
		}
	}
}

// A watcher that keeps up sends its delta alone, at once; a gap in one
// attempt's offsets is never closed by a merge.
func TestCoalescedKeepsAGapAndALoneDelta(t *testing.T) {
	if got, _ := coalesced(nil, text("a", 1, 0, "abc"), queued()); len(got) != 1 || got[0].Text != "abc" {
		t.Fatalf("alone: %+v", got)
	}
	got, _ := coalesced(nil, text("a", 1, 0, "abc"), queued(text("a", 1, 4, "e")))
	if len(got) != 2 || got[1].Offset != 4 {
		t.Fatalf("a gap merged: %+v", got)
	}
}

// A merge stops at maxCoalescedText and takes in at most maxCoalesced
// deltas, so one send stays bounded; a closed channel is reported.
func TestCoalescedIsBounded(t *testing.T) {
	big := strings.Repeat("x", maxCoalescedText/2+1)
	got, _ := coalesced(nil, text("a", 1, 0, big), queued(text("a", 1, uint64(len(big)), big)))
	if len(got) != 2 {
		t.Fatalf("two halves over the bound merged into %d deltas", len(got))
	}
	var ds []livestream.Delta
	for i := range 2 * maxCoalesced {
		ds = append(ds, text("a", 1, uint64(1+i), "y"))
	}
	ch := queued(ds...)
	got, _ = coalesced(nil, text("a", 1, 0, "y"), ch)
	if len(got) != 1 || len(got[0].Text) != maxCoalesced || len(ch) != 2*maxCoalesced-(maxCoalesced-1) {
		t.Fatalf("took %d bytes in %d deltas, left %d; want %d bytes, %d left", len(got[0].Text), len(got), len(ch), maxCoalesced, 2*maxCoalesced-(maxCoalesced-1))
	}
	closing := queued(text("a", 1, 3, "d"))
	close(closing)
	if got, closed := coalesced(nil, text("a", 1, 0, "abc"), closing); !closed || len(got) != 1 || got[0].Text != "abcd" {
		t.Fatalf("closed channel: %+v, closed %v", got, closed)
	}
}
