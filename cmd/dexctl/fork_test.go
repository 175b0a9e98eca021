package main

import (
	"encoding/json"
	"strings"
	"testing"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

func TestSessionForkSendsTheRequestAndPrintsTheFork(t *testing.T) {
	f := &fakeSessions{}
	addr := startFake(t, f)
	out, err := run(t, "--addr", addr, "session", "fork", "s1", "--at", "4", "--id", "f1", "--message", "try again",
		"--label", "team=blue", "--label", "env=", "--agent", "coder")
	if err != nil {
		t.Fatal(err)
	}
	if out != "f1  forked from s1 at entry 4\n" {
		t.Fatalf("printed %q", out)
	}
	if len(f.forks) != 1 {
		t.Fatalf("sent %v", f.forks)
	}
	req := f.forks[0]
	if req.SourceSessionId != "s1" || req.AtSeq != 4 || req.SessionId != "f1" || req.Message != "try again" || req.Agent != "coder" ||
		labelText(req.Labels) != "team=blue,env=" {
		t.Fatalf("sent %v", req)
	}
	// Without --id one is drawn, the same on every try; --json says what
	// was created.
	out, err = run(t, "--addr", addr, "session", "fork", "s1", "--at", "2", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%q: %v", out, err)
	}
	if got["id"] != f.forks[1].SessionId || f.forks[1].SessionId == "" || got["forked_from"] != "s1" || got["forked_at_seq"] != 2.0 || got["status"] != "idle" {
		t.Fatalf("--json printed %v (sent %v)", got, f.forks[1])
	}
	if f.forks[1].Labels != nil || f.forks[1].Message != "" {
		t.Fatalf("a fork without --label or --message sent %v", f.forks[1])
	}
}

func TestSessionForkRefusals(t *testing.T) {
	f := &fakeSessions{}
	addr := startFake(t, f)
	if _, err := run(t, "--addr", addr, "session", "fork", "s1"); err == nil || !isUsage(err) || !strings.Contains(err.Error(), "--at SEQ") {
		t.Errorf("no --at: %v; want a usage error", err)
	}
	if _, err := run(t, "--addr", addr, "session", "fork", "s1", "--at", "1", "--label", "novalue"); err == nil || !isUsage(err) {
		t.Errorf("a label without =: %v; want a usage error", err)
	}
	if _, err := run(t, "--addr", addr, "session", "fork", "nobody", "--at", "1"); err == nil || !strings.Contains(err.Error(), `session "nobody" not found`) {
		t.Errorf("an unknown session: %v", err)
	}
	if _, err := run(t, "--addr", addr, "session", "fork", "s1", "--at", "9"); err == nil || !strings.Contains(err.Error(), "inside turn 3, which has not ended") {
		t.Errorf("an entry of an unfinished turn: %v", err)
	}
	if len(f.forks) != 0 {
		t.Fatalf("refused forks were sent: %v", f.forks)
	}
}

func TestSessionShowAndListNameTheFork(t *testing.T) {
	f := &fakeSessions{pageSize: 10, all: []*dexv1.SessionSummary{
		{Id: "f1", Status: dexv1.SessionStatus_SESSION_STATUS_IDLE, ForkedFrom: "s1", ForkedAtSeq: 4},
	}}
	addr := startFake(t, f)
	out, err := run(t, "--addr", addr, "session", "show", "f1")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "\nforked from: s1 at entry 4\n") {
		t.Fatalf("show printed:\n%s", out)
	}
	if _, err := run(t, "--addr", addr, "session", "list", "--forked-from", "s1"); err != nil {
		t.Fatal(err)
	}
	if n := len(f.lists); n == 0 || f.lists[n-1].ForkedFrom != "s1" || !f.lists[n-1].Descending {
		t.Fatalf("list --forked-from sent %v", f.lists)
	}
}
