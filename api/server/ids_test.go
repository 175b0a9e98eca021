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

func TestRequestsWithBadIDsAreRefusedAndChangeNothing(t *testing.T) {
	_, c := singleNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.CreateSession(ctx, &dexv1.CreateSessionRequest{SessionId: "ok"}); err != nil {
		t.Fatal(err)
	}
	bad := func(what string, err error, want string) {
		t.Helper()
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), want) {
			t.Errorf("%s: %v; want InvalidArgument with %q", what, err, want)
		}
	}
	_, err := c.CreateSession(ctx, &dexv1.CreateSessionRequest{SessionId: "a/../../b"})
	bad("create a/../../b", err, "use only letters, digits")
	_, err = c.CreateSession(ctx, &dexv1.CreateSessionRequest{SessionId: "x\x1b[2J"})
	bad("create with ESC", err, `holds '\x1b'`)
	_, err = c.CreateSession(ctx, &dexv1.CreateSessionRequest{SessionId: "dots..dots"})
	bad("create with ..", err, `hold ".."`)
	_, err = c.CreateSession(ctx, &dexv1.CreateSessionRequest{SessionId: "child", ParentId: "p/q"})
	bad("parent with /", err, "parent_id")
	_, err = c.SendMessage(ctx, &dexv1.SendMessageRequest{SessionId: "ok", IdempotencyKey: "k\x00", Text: "hi"})
	bad("key with NUL", err, "unprintable")
	_, err = c.ResolveApproval(ctx, &dexv1.ResolveApprovalRequest{StepId: "ok-s1\u202e", Approved: true})
	bad("step id with a bidi override", err, "step_id")
	_, err = c.GetSession(ctx, &dexv1.GetSessionRequest{SessionId: "../etc"})
	bad("get ../etc", err, "session_id")
	watch, err := c.WatchSession(ctx, &dexv1.WatchSessionRequest{SessionId: "a/b"})
	if err == nil {
		_, err = watch.Recv()
	}
	bad("watch a/b", err, "session_id")

	list, err := c.ListSessions(ctx, &dexv1.ListSessionsRequest{})
	if err != nil || len(list.Sessions) != 1 {
		t.Fatalf("sessions after the refusals: %v, %v; want ok only", list, err)
	}
}
