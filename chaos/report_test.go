package chaos

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func sampleReport() Report {
	return Report{
		Started: time.Date(2026, 11, 30, 7, 0, 0, 0, time.UTC),
		Wall:    95 * time.Second,
		Target:  "dex:///",
		Cells: []CellResult{
			{Step: "RunModel", Moment: "before any output reaches the cluster", Column: ColWorkerKill, Result: ResultPass, Seconds: 18.64},
			{Step: "RunModel", Moment: "before any output reaches the cluster", Column: ColTakeover, Result: ResultPass, Seconds: 4.4,
				Takeovers: []time.Duration{1800 * time.Millisecond}},
			{Step: "RunModel", Moment: "before any output reaches the cluster", Column: ColTakeoverDex, Result: ResultPass, Seconds: 4.2,
				Takeovers: []time.Duration{2200 * time.Millisecond, 1000 * time.Millisecond, 3000 * time.Millisecond}},
			{Step: "any wait", Moment: "after the wait ended, while the state machine moves the turn on", Column: ColTakeover, Result: ResultNA,
				Reason: "needs the chaos build (failpoint dexAfterWaitResolved)"},
			{Step: "inline tool", Moment: "while it runs", Column: ColWorkerKill, Result: ResultFail, Seconds: 61.2,
				Reason: "session s1: idle not reached | within 1m0s"},
		},
	}
}

func TestReport_JSONHasTheCellsAndTheirVerdicts(t *testing.T) {
	b, err := sampleReport().JSON()
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Cells []map[string]any `json:"cells"`
		Summary
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw["summary"], &got.Summary); err != nil {
		t.Fatal(err)
	}
	if len(got.Cells) != 5 {
		t.Fatalf("%d cells", len(got.Cells))
	}
	c := got.Cells[0]
	want := map[string]any{"step": "RunModel", "moment": "before any output reaches the cluster", "column": "worker-kill", "result": "pass", "reason": "", "seconds": 18.6}
	if len(c) != len(want) {
		t.Fatalf("cell fields %v; want exactly %v", c, want)
	}
	for k, v := range want {
		if c[k] != v {
			t.Fatalf("cell %s = %v; want %v", k, c[k], v)
		}
	}
	if got.Cells[3]["result"] != "n/a" || got.Cells[3]["reason"] == "" || got.Cells[4]["result"] != "fail" {
		t.Fatalf("n/a and fail cells: %v %v", got.Cells[3], got.Cells[4])
	}
	s := got.Summary
	if s.Pass != 3 || s.Fail != 1 || s.NA != 1 || s.Total != 5 || s.WallSeconds != 95 {
		t.Fatalf("summary %+v", s)
	}
	// Takeovers 1.0, 1.8, 2.2, 3.0: median 2.0, max 3.0.
	if s.Takeovers != 4 || s.TakeoverMedianSeconds != 2 || s.TakeoverMaxSeconds != 3 {
		t.Fatalf("takeover times %+v", s)
	}
	if len(s.Columns) != 3 || s.Columns[0].Column != ColWorkerKill || s.Columns[0].Pass != 1 || s.Columns[0].Fail != 1 {
		t.Fatalf("per column %+v", s.Columns)
	}
}

func TestReport_MarkdownIsTheSpecTableWithTheColumns(t *testing.T) {
	md := sampleReport().Markdown()
	for _, want := range []string{
		"| Step | Interrupted | Expected | Worker kill | Takeover | Takeover (dex:///) |",
		"| RunModel | before any output reaches the cluster | the model call runs again",
		"| pass 18.6s | pass 4.4s | pass 4.2s |",
		"| inline tool | while it runs | it repeats with RunModel: at least once | **FAIL** 61.2s | — | — |",
		"| any wait | after the wait ended, while the state machine moves the turn on |",
		"| — | n/a | — |",
		"- n/a — takeover | any wait | after the wait ended, while the state machine moves the turn on: needs the chaos build",
		"- FAIL — worker-kill | inline tool | while it runs: session s1: idle not reached | within 1m0s",
		"median 2.00s, max 3.00s over 4 takeovers",
		"- Cells: 3 pass, 1 fail, 1 n/a of 5",
		"(`worker-kill`, 1/2 pass)",
	} {
		if !strings.Contains(md, want) {
			t.Fatalf("matrix.md lacks %q:\n%s", want, md)
		}
	}
	// Rows with no cell run are left out; columns not run have no header.
	if strings.Contains(md, "CompactContext") || strings.Contains(md, "Leader pause |") {
		t.Fatalf("matrix.md shows rows or columns that did not run:\n%s", md)
	}
	// A | inside the Expected text would break the table.
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "| inline tool") && strings.Count(line, " | ") != 5 {
			t.Fatalf("row with %d cells: %q", strings.Count(line, " | "), line)
		}
	}
}

func TestReport_WriteReportWritesBothFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	if err := WriteReport(dir, sampleReport()); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"matrix.md", "matrix.json"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Size() == 0 {
			t.Fatalf("%s: %v", f, err)
		}
	}
	if err := WriteReport(t.TempDir(), Report{}); err != nil {
		t.Fatal(err)
	}
	b, err := Report{}.JSON()
	if err != nil || !strings.Contains(string(b), `"cells": []`) {
		t.Fatalf("an empty report: %s %v", b, err)
	}
}
