package main

import (
	"strings"
	"testing"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

func TestSessionClose(t *testing.T) {
	f := &fakeSessions{}
	addr := startFake(t, f)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"idle"}, "closed idle (deleted after 2026-01-01T01:00:00Z)\n"},
		{[]string{"forever"}, "closed forever (kept for ever)\n"},
		{[]string{"busy"}, "busy is closing: it takes no more messages and is closed when its turn ends\n"},
		{[]string{"idle", "--json"}, `"closed": true`},
		{[]string{"busy", "--json"}, `"closing": true`},
	} {
		out, err := run(t, append([]string{"--addr", addr, "session", "close"}, tc.args...)...)
		if err != nil || !strings.Contains(out, tc.want) {
			t.Errorf("close %v: %q, %v; want %q", tc.args, out, err, tc.want)
		}
	}
	if len(f.closes) != 5 || f.closes[0].SessionId != "idle" {
		t.Fatalf("requests %v", f.closes)
	}
	if _, err := run(t, "--addr", addr, "session", "close", "nobody"); err == nil || !strings.Contains(err.Error(), `session "nobody" not found`) {
		t.Fatalf("close of an unknown session: %v", err)
	}
	if _, err := run(t, "--addr", addr, "session", "close"); err == nil || !strings.Contains(err.Error(), "give a session ID, or a filter") {
		t.Fatalf("close without an id: %v", err)
	}
}

func TestSessionStart_Retention(t *testing.T) {
	f := &fakeSessions{}
	addr := startFake(t, f)
	for _, args := range [][]string{{"--id", "own", "--retention", "36h"}, {"--id", "forever", "--retention", "0"}, {"--id", "default"}} {
		if _, err := run(t, append([]string{"--addr", addr, "session", "start"}, args...)...); err != nil {
			t.Fatal(err)
		}
	}
	if len(f.created) != 3 || f.created[0].GetRetentionMs() != (36*time.Hour).Milliseconds() ||
		f.created[1].RetentionMs == nil || f.created[1].GetRetentionMs() != 0 || f.created[2].RetentionMs != nil {
		t.Fatalf("requests %v", f.created)
	}
	if _, err := run(t, "--addr", addr, "session", "start", "--retention", "-1h"); err == nil || !strings.Contains(err.Error(), "--retention must not be negative") {
		t.Fatalf("a negative retention: %v", err)
	}
	if _, err := run(t, "--addr", addr, "session", "start", "--retention", "soon"); err == nil || !strings.Contains(err.Error(), "invalid argument \"soon\"") {
		t.Fatalf("a retention that is no duration: %v", err)
	}
	if len(f.created) != 3 {
		t.Fatalf("a refused start sent %d requests", len(f.created)-3)
	}
}

func TestPrintSession_ClosingAndClosed(t *testing.T) {
	for _, tc := range []struct {
		s    *dexv1.Session
		want string
	}{
		{&dexv1.Session{Id: "a", Status: dexv1.SessionStatus_SESSION_STATUS_RUNNING, CloseRequestedAtMs: 1}, "session a  running  closing: closed when its turn ends\n"},
		{&dexv1.Session{Id: "b", Status: dexv1.SessionStatus_SESSION_STATUS_CLOSED, CloseRequestedAtMs: 1, DeleteAtMs: 1767229200000}, "session b  closed  kept until 2026-01-01T01:00:00Z\n"},
		{&dexv1.Session{Id: "c", Status: dexv1.SessionStatus_SESSION_STATUS_CLOSED, CloseRequestedAtMs: 1}, "session c  closed  kept for ever\n"},
	} {
		var out strings.Builder
		printSession(&out, toSessionJSON(tc.s, nil), 1)
		if !strings.HasPrefix(out.String(), tc.want) {
			t.Errorf("printed %q; want it to begin %q", out.String(), tc.want)
		}
	}
}
