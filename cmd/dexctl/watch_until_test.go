package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

func TestSessionWatchUntilIdleEndsWithASummary(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).UnixMilli()
	f := &fakeSessions{
		all: []*dexv1.SessionSummary{{Id: "s1", Status: dexv1.SessionStatus_SESSION_STATUS_IDLE}},
		events: map[string][]*dexv1.Event{"s1": {
			{Seq: 1, SessionId: "s1", Type: "attempt_started", StepId: "s1-s1", Detail: "attempt 1 on w1", AtMs: at},
			{Seq: 2, SessionId: "s1", Type: "attempt_claimed", StepId: "s1-s1", Detail: "s1-s1#1@7", AtMs: at},
			{Seq: 3, SessionId: "s1", Type: "turn_completed", AtMs: at},
		}},
		lastSeq: 3,
	}
	addr := startFake(t, f)
	done := make(chan struct{})
	var out string
	var err error
	go func() { out, err = run(t, "--addr", addr, "session", "watch", "s1", "--until-idle"); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("watch --until-idle still running after the session settled")
	}
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 {
		t.Fatalf("output:\n%s\nwant 3 events and the summary", out)
	}
	if !strings.Contains(lines[0], "2026-03-01T12:00:00.000Z") {
		t.Fatalf("event time not RFC 3339: %q", lines[0])
	}
	if strings.Contains(lines[1], "#1@7") || !strings.Contains(lines[1], "attempt 1") {
		t.Fatalf("claim event shows a token: %q", lines[1])
	}
	if lines[3] != "session s1 is idle: 0 turns completed, 0 failed" {
		t.Fatalf("summary %q", lines[3])
	}
}

func TestSessionWatchUntilIdleOfAnIdleSessionEndsAtOnce(t *testing.T) {
	f := &fakeSessions{all: []*dexv1.SessionSummary{{Id: "s1", Status: dexv1.SessionStatus_SESSION_STATUS_PAUSED}}}
	addr := startFake(t, f)
	out, err := run(t, "--addr", addr, "session", "watch", "s1", "--until-idle")
	if err != nil || strings.TrimSpace(out) != "session s1 is paused: 0 turns completed, 0 failed" {
		t.Fatalf("%q, %v", out, err)
	}
}

func TestReadableDetailHidesTokens(t *testing.T) {
	var b bytes.Buffer
	printEvent(&b, &dexv1.Event{Seq: 9, Type: "attempt_claimed", StepId: "ses-x-s3", Detail: "ses-x-s3#2@14"}, false)
	if strings.Contains(b.String(), "@14") || !strings.Contains(b.String(), "attempt 2") {
		t.Fatalf("%q", b.String())
	}
}
