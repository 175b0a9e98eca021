package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

func TestCancelSession_CodesAndTheTurnStops(t *testing.T) {
	_, c := singleNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.CreateSession(ctx, &dexv1.CreateSessionRequest{SessionId: "busy", Message: "go"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateSession(ctx, &dexv1.CreateSessionRequest{SessionId: "quiet"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id   string
		code codes.Code
		msg  string
	}{
		{"", codes.InvalidArgument, "session_id is required"},
		{"nobody", codes.NotFound, `session "nobody" not found`},
		{"quiet", codes.FailedPrecondition, "no turn in progress"},
	} {
		_, err := c.CancelSession(ctx, &dexv1.CancelSessionRequest{SessionId: tc.id})
		if status.Code(err) != tc.code || !strings.Contains(status.Convert(err).Message(), tc.msg) {
			t.Fatalf("cancel %q: %v; want %s %q", tc.id, err, tc.code, tc.msg)
		}
	}
	resp, err := c.CancelSession(ctx, &dexv1.CancelSessionRequest{SessionId: "busy", By: "alice", Reason: "wrong repo"})
	if err != nil || resp.StepsCancelled != 1 || resp.AttemptsCancelled != 0 {
		t.Fatalf("cancel busy: %v, %v; want 1 queued Step dropped", resp, err)
	}
	r, err := c.GetSession(ctx, &dexv1.GetSessionRequest{SessionId: "busy"})
	if err != nil || r.Session.Status != dexv1.SessionStatus_SESSION_STATUS_IDLE {
		t.Fatalf("after the cancel: %v, %v; want idle", r, err)
	}
	if last := r.Session.History[len(r.Session.History)-1]; last.Text != "The previous turn was cancelled by alice: wrong repo" {
		t.Fatalf("last history entry %q", last.Text)
	}
}
