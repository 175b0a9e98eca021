package main

import (
	"strings"
	"testing"
)

func TestSessionCancel(t *testing.T) {
	f := &fakeSessions{}
	addr := startFake(t, f)
	out, err := run(t, "--addr", addr, "session", "cancel", "s1", "--by", "alice", "--reason", "wrong repo")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "cancelled the turn of s1: 2 Steps ended, 1 running attempt cancelled") {
		t.Fatalf("output %q", out)
	}
	if len(f.cancels) != 1 || f.cancels[0].By != "alice" || f.cancels[0].Reason != "wrong repo" {
		t.Fatalf("requests %v", f.cancels)
	}
	if _, err := run(t, "--addr", addr, "session", "cancel", "nobody"); err == nil || !strings.Contains(err.Error(), `session "nobody" not found`) {
		t.Fatalf("cancel of an unknown session: %v", err)
	}
	if _, err := run(t, "--addr", addr, "session", "cancel"); err == nil || !strings.Contains(err.Error(), "give a session ID, or a filter") {
		t.Fatalf("cancel without an id: %v", err)
	}
}
