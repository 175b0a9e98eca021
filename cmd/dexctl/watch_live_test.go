package main

import (
	"bytes"
	"strings"
	"testing"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

func TestLivePrinter_TextRunsOnOneLineUntilItEnds(t *testing.T) {
	var b bytes.Buffer
	p := &livePrinter{w: &b}
	delta := func(typ string, attempt uint32, text string) *dexv1.Event {
		return &dexv1.Event{Type: typ, StepId: "s-s1", Output: &dexv1.OutputDelta{Attempt: attempt, Text: text}}
	}
	for _, e := range []*dexv1.Event{
		delta("output", 1, "Hel"), delta("output", 1, "lo\x1b"), delta("output_abandoned", 1, ""),
		delta("output", 2, "Hi"), {Seq: 7, Type: "attempt_claimed", StepId: "s-s2"}, delta("output_ended", 2, ""),
	} {
		if err := p.print(e); err != nil {
			t.Fatal(err)
		}
	}
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("printed %q; want 3 lines", b.String())
	}
	if !strings.HasSuffix(lines[0], `s-s1 attempt 1: Hello\x1b [abandoned: the attempt failed; a retry streams anew]`) {
		t.Errorf("attempt 1's line %q", lines[0])
	}
	if !strings.HasSuffix(lines[1], "s-s1 attempt 2: Hi") || !strings.Contains(lines[2], "attempt_claimed") {
		t.Errorf("an event ends the open line: %q", lines[1:])
	}
}
