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

func TestDeleteSession_CodesAndAWatchThatSeesTheDelete(t *testing.T) {
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
		{"busy", codes.FailedPrecondition, "session busy is running: only an idle, paused, errored or closed session can be deleted"},
	} {
		_, err := c.DeleteSession(ctx, &dexv1.DeleteSessionRequest{SessionId: tc.id})
		if status.Code(err) != tc.code || !strings.Contains(status.Convert(err).Message(), tc.msg) {
			t.Fatalf("delete %q: %v; want %s %q", tc.id, err, tc.code, tc.msg)
		}
	}
	if r, err := c.GetSession(ctx, &dexv1.GetSessionRequest{SessionId: "busy"}); err != nil || r.Session.Status != dexv1.SessionStatus_SESSION_STATUS_RUNNING {
		t.Fatalf("a refused delete changed the session: %v, %v", r, err)
	}

	watch, err := c.WatchSession(ctx, &dexv1.WatchSessionRequest{SessionId: "quiet"})
	if err != nil {
		t.Fatal(err)
	}
	if ev, err := watch.Recv(); err != nil || ev.Type != "session_created" {
		t.Fatalf("first event %v, %v", ev, err)
	}
	if _, err := c.DeleteSession(ctx, &dexv1.DeleteSessionRequest{SessionId: "quiet"}); err != nil {
		t.Fatal(err)
	}
	if _, err := watch.Recv(); status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), `session "quiet" was deleted`) {
		t.Fatalf("the watch ended with %v; want NotFound saying it was deleted", err)
	}
	if _, err := c.GetSession(ctx, &dexv1.GetSessionRequest{SessionId: "quiet"}); status.Code(err) != codes.NotFound {
		t.Fatalf("get after the delete: %v; want NotFound", err)
	}
	if _, err := c.DeleteSession(ctx, &dexv1.DeleteSessionRequest{SessionId: "quiet"}); status.Code(err) != codes.NotFound {
		t.Fatalf("a second delete: %v; want NotFound", err)
	}
	list, err := c.ListSessions(ctx, &dexv1.ListSessionsRequest{})
	if err != nil || len(list.Sessions) != 1 || list.Sessions[0].Id != "busy" {
		t.Fatalf("listed %v, %v; want busy only", list, err)
	}
}
