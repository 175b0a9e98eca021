package chaos

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
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

// plainBin is a bin dir with the normal builds only: the package's binDir
// may also hold the chaos build another test made in binDir/chaos.
func plainBin(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, b := range []string{"dexd", "dexworker", "dexctl"} {
		if err := os.Symlink(filepath.Join(binDir, b), filepath.Join(dir, b)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestMatrix_ChaosBuildIsFoundByItsBuildTags(t *testing.T) {
	if _, err := ChaosDexd(plainBin(t)); err == nil {
		t.Fatal("the normal build of dexd passed for the chaos build")
	}
	if _, err := ChaosDexd(t.TempDir()); err == nil {
		t.Fatal("an empty directory passed for the chaos build")
	}
}

// A failpoint cell without the chaos build is n/a with the reason; a cell
// runs for real and passes; its notes are written.
func TestMatrix_RunsCellsAndSaysWhyOneIsNotApplicable(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	cells, err := SelectCells([]string{ColTakeover}, "idle session|after the Worker sent its result")
	if err != nil || len(cells) != 2 {
		t.Fatal(cells, err)
	}
	out := t.TempDir()
	var progress bytes.Buffer
	res := RunMatrix(context.Background(), MatrixOptions{BinDir: plainBin(t), Out: out, Progress: &progress}, cells)
	if res[0].Result != ResultPass || len(res[0].Takeovers) != 1 {
		t.Fatalf("idle session × takeover: %+v\n%s", res[0], progress.String())
	}
	if res[1].Result != ResultNA || !strings.Contains(res[1].Reason, "needs the chaos build") {
		t.Fatalf("a failpoint cell on the normal build: %+v", res[1])
	}
	if !strings.Contains(progress.String(), "[1/2] takeover | idle session | waiting for a user message ... pass") {
		t.Fatalf("progress: %q", progress.String())
	}
	notes, err := os.ReadFile(filepath.Join(out, "cells", "takeover-idle-session-waiting-for-a-user-message.txt"))
	if err != nil || !strings.Contains(string(notes), "SIGKILL leader") || !strings.Contains(string(notes), "rejoined") {
		t.Fatalf("cell notes: %s %v", notes, err)
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
