package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// listFake holds 5 sessions whose ids sort opposite to their age, in
// pages of 2.
func listFake(t *testing.T) string {
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).UnixMilli()
	f := &fakeSessions{pageSize: 2}
	for i := 1; i <= 5; i++ {
		st := dexv1.SessionStatus_SESSION_STATUS_IDLE
		if i%2 == 0 {
			st = dexv1.SessionStatus_SESSION_STATUS_RUNNING
		}
		f.all = append(f.all, &dexv1.SessionSummary{
			Id: fmt.Sprintf("a%d", i), Status: st, CreatedAtMs: base - int64(i)*60_000, UpdatedAtMs: base,
		})
	}
	return startFake(t, f)
}

func listedIDs(t *testing.T, out string) []string {
	t.Helper()
	var got struct {
		Sessions []sessionRow `json:"sessions"`
		Next     *string      `json:"next_page_token"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var ids []string
	for _, s := range got.Sessions {
		ids = append(ids, s.ID)
	}
	return ids
}

func TestSessionListNewestFirstFilteredAndPaged(t *testing.T) {
	addr := listFake(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "a1 a2 a3 a4 a5"}, // every page, newest first
		{[]string{"--status", "running"}, "a2 a4"},
		{[]string{"--limit", "2"}, "a1 a2"},
		{[]string{"--page-size", "2"}, "a1 a2"},
		{[]string{"--page-token", "a3"}, "a3 a4"},
	} {
		out, err := run(t, append([]string{"--addr", addr, "session", "list", "--json"}, tc.args...)...)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(listedIDs(t, out), " "); got != tc.want {
			t.Errorf("session list %v: %s; want %s", tc.args, got, tc.want)
		}
	}
	out, err := run(t, "--addr", addr, "session", "list", "--page-size", "2")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if !strings.HasPrefix(lines[0], "ID") || !strings.Contains(lines[0], "CREATED") {
		t.Fatalf("header %q", lines[0])
	}
	if !strings.Contains(lines[1], "a1") || !strings.Contains(lines[1], "2026-03-01T11:59:00Z") {
		t.Fatalf("first row %q: want a1 with its created time", lines[1])
	}
	if lines[len(lines)-1] != "next page: --page-token a3" {
		t.Fatalf("last line %q", lines[len(lines)-1])
	}
	if _, err := run(t, "--addr", addr, "session", "list", "--status", "busy"); err == nil || !isUsage(err) || !strings.Contains(err.Error(), "use one of idle, running") {
		t.Fatalf("bad --status: %v", err)
	}
}

func TestSessionListShowsTheStartOfEachFirstMessage(t *testing.T) {
	long := "Plan the week:\n  dinner for four, then a walk along the river on Sunday"
	f := &fakeSessions{pageSize: 10, all: []*dexv1.SessionSummary{
		{Id: "m1", Status: dexv1.SessionStatus_SESSION_STATUS_IDLE, CreatedAtMs: 2, FirstMessage: long},
		{Id: "m2", Status: dexv1.SessionStatus_SESSION_STATUS_IDLE, CreatedAtMs: 1},
	}}
	addr := startFake(t, f)
	out, err := run(t, "--addr", addr, "session", "list")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasSuffix(strings.TrimSpace(lines[0]), "MESSAGE") {
		t.Fatalf("want a header ending in MESSAGE and 2 rows:\n%s", out)
	}
	// One line, spaces folded, cut at 40 characters with an ellipsis.
	if want := "Plan the week: dinner for four, then a …"; !strings.HasSuffix(lines[1], want) {
		t.Errorf("row %q: want it to end with %q", lines[1], want)
	}
	if !strings.HasSuffix(lines[2], " -") {
		t.Errorf("row %q: a session with no message should show -", lines[2])
	}
	out, err = run(t, "--addr", addr, "session", "list", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Sessions []sessionRow `json:"sessions"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Sessions) != 2 || got.Sessions[0].FirstMessage != long || got.Sessions[1].FirstMessage != "" {
		t.Fatalf("JSON should carry the first message whole: %s", out)
	}
}
