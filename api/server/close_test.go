package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

func TestCloseSession_RetentionByAgentAndSessionMessagesRefusedAndCodes(t *testing.T) {
	_, _, conn := serveSingleNode(t, Options{Retention: Retention{Default: time.Hour, Agents: map[string]time.Duration{"bot": time.Minute}}})
	c := dexv1.NewSessionServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, req := range []*dexv1.CreateSessionRequest{
		{SessionId: "plain"},
		{SessionId: "bot", Agent: "bot"},
		{SessionId: "own", Agent: "bot", RetentionMs: proto.Int64(5000)},
		{SessionId: "busy", Message: "go"}, // no Worker: its turn stays running
	} {
		if _, err := c.CreateSession(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	for id, want := range map[string]time.Duration{"plain": time.Hour, "bot": time.Minute, "own": 5 * time.Second} {
		r, err := c.CloseSession(ctx, &dexv1.CloseSessionRequest{SessionId: id})
		if err != nil {
			t.Fatalf("close %s: %v", id, err)
		}
		s := r.Session
		if s.Status != dexv1.SessionStatus_SESSION_STATUS_CLOSED || time.Duration(s.DeleteAtMs-s.ClosedAtMs)*time.Millisecond != want || s.GetRetentionMs() != want.Milliseconds() {
			t.Fatalf("%s closed as %s, kept %s (retention %d ms); want closed, kept %s", id, s.Status, time.Duration(s.DeleteAtMs-s.ClosedAtMs)*time.Millisecond, s.GetRetentionMs(), want)
		}
	}
	r, err := c.CloseSession(ctx, &dexv1.CloseSessionRequest{SessionId: "busy"})
	if err != nil || r.Session.Status != dexv1.SessionStatus_SESSION_STATUS_RUNNING || r.Session.CloseRequestedAtMs == 0 {
		t.Fatalf("close of a running session: %v, %v; want it accepted and closing", r, err)
	}
	if _, err := c.CloseSession(ctx, &dexv1.CloseSessionRequest{SessionId: "plain"}); err != nil {
		t.Fatalf("a second close: %v; want a no-op success", err)
	}
	got, err := c.GetSession(ctx, &dexv1.GetSessionRequest{SessionId: "plain"})
	if err != nil || got.Session.Status != dexv1.SessionStatus_SESSION_STATUS_CLOSED {
		t.Fatalf("a closed session reads %v, %v", got, err)
	}

	for _, tc := range []struct {
		what string
		err  error
		code codes.Code
		msg  string
	}{
		{"close without an id", closeErr(ctx, c, ""), codes.InvalidArgument, "session_id is required"},
		{"close of an unknown session", closeErr(ctx, c, "nobody"), codes.NotFound, `session "nobody" not found`},
		{"a message to a closed session", sendErr(ctx, c, "plain"), codes.FailedPrecondition, "session plain is closed: it takes no more messages"},
		{"a message to a closing session", sendErr(ctx, c, "busy"), codes.FailedPrecondition, "session busy is closing"},
		{"a negative retention", createErr(ctx, c, "bad", -1), codes.InvalidArgument, "retention_ms must not be negative"},
	} {
		if status.Code(tc.err) != tc.code || !strings.Contains(status.Convert(tc.err).Message(), tc.msg) {
			t.Errorf("%s: %v; want %s %q", tc.what, tc.err, tc.code, tc.msg)
		}
	}
	if _, err := c.GetSession(ctx, &dexv1.GetSessionRequest{SessionId: "bad"}); status.Code(err) != codes.NotFound {
		t.Fatalf("a refused create left a session: %v", err)
	}
	if _, err := c.DeleteSession(ctx, &dexv1.DeleteSessionRequest{SessionId: "plain"}); err != nil {
		t.Fatalf("delete of a closed session: %v", err)
	}
	if err := closeErr(ctx, c, "plain"); status.Code(err) != codes.NotFound {
		t.Fatalf("close of a deleted session: %v; want NotFound", err)
	}
}

func closeErr(ctx context.Context, c dexv1.SessionServiceClient, id string) error {
	_, err := c.CloseSession(ctx, &dexv1.CloseSessionRequest{SessionId: id})
	return err
}

func sendErr(ctx context.Context, c dexv1.SessionServiceClient, id string) error {
	_, err := c.SendMessage(ctx, &dexv1.SendMessageRequest{SessionId: id, Text: "more", IdempotencyKey: "k-" + id})
	return err
}

func createErr(ctx context.Context, c dexv1.SessionServiceClient, id string, retentionMs int64) error {
	_, err := c.CreateSession(ctx, &dexv1.CreateSessionRequest{SessionId: id, RetentionMs: proto.Int64(retentionMs)})
	return err
}

func TestRetention_ForAnAgentFallsBackToTheDefault(t *testing.T) {
	r := Retention{Default: time.Hour, Agents: map[string]time.Duration{"bot": 0, "": time.Minute}}
	if r.For("bot") != 0 || r.For("") != time.Minute || r.For("other") != time.Hour {
		t.Fatalf("bot %s, default agent %s, other %s", r.For("bot"), r.For(""), r.For("other"))
	}
}
