package chaos

import (
	"context"
	"strings"
	"testing"
)

func TestMatrix_EveryRowOfTheSpecAgainstEveryColumn(t *testing.T) {
	if len(Rows) != 21 {
		t.Fatalf("%d rows; docs/crash-matrix.md has 21", len(Rows))
	}
	seen := map[string]bool{}
	for _, r := range Rows {
		if err := r.scenario.validate(); err != nil || r.Expected == "" || seen[r.Name()] {
			t.Fatalf("row %q: a bad scenario (%v), no expectation or a duplicate", r.Name(), err)
		}
		seen[r.Name()] = true
		for col := range r.NA {
			if _, ok := ColumnByName(col); !ok {
				t.Fatalf("row %q is n/a in unknown column %q", r.Name(), col)
			}
		}
	}
	cells, err := SelectCells(nil, "")
	if err != nil || len(cells) != 105 {
		t.Fatalf("%d cells, %v; want 105", len(cells), err)
	}
	cells, err = SelectCells([]string{ColTakeover}, "PollToolTask")
	if err != nil || len(cells) != 2 || cells[0].Column.Name != ColTakeover || cells[1].Row.Moment != "during a poll" {
		t.Fatalf("one column, one row pattern: %v %v", cells, err)
	}
	if _, err := SelectCells([]string{"nope"}, ""); err == nil || !strings.Contains(err.Error(), "worker-kill") {
		t.Fatalf("unknown column: %v", err)
	}
	if _, err := SelectCells(nil, "no such row"); err == nil {
		t.Fatal("a pattern that matches nothing was accepted")
	}
	if _, err := SelectCells(nil, "("); err == nil {
		t.Fatal("a bad pattern was accepted")
	}
}

func TestMatrix_HeldTaskDescription(t *testing.T) {
	h := parseHeld("before-claim step=s1-3 session=s1 kind=STEP_KIND_CALL_TOOL tool=save_note attempt=2 pid=42")
	if h.Moment != "before-claim" || h.Step != "s1-3" || h.Session != "s1" || h.Tool != "save_note" || h.Attempt != 2 || !isKind(h, kindCallTool) {
		t.Fatalf("%+v", h)
	}
	if got := slug("takeover | CallTool, read | while the tool runs"); got != "takeover-calltool-read-while-the-tool-runs" {
		t.Fatalf("slug %q", got)
	}
}

// A row about one framework adapter is n/a, with the reason, for every
// other Worker; it starts no process there.
func TestMatrix_AdapterRowIsNotApplicableToOtherWorkers(t *testing.T) {
	cells, err := SelectCells([]string{ColWorkerKill}, "Claude Agent SDK")
	if err != nil || len(cells) != 1 || cells[0].Row.Adapter != "claude-agent-sdk" {
		t.Fatal(cells, err)
	}
	for _, o := range []MatrixOptions{{}, {Worker: "typescript"}, {Worker: "typescript", Adapter: "ai-sdk"}} {
		o.BinDir = t.TempDir()
		res := RunMatrix(context.Background(), o, cells)
		if res[0].Result != ResultNA || !strings.Contains(res[0].Reason, "--adapter claude-agent-sdk") {
			t.Fatalf("%+v: %+v", o, res[0])
		}
	}
}
