package server

import (
	"context"
	"testing"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// dexctl's list shows when each session was created, and its watch
// --until-idle knows it has caught up from the latest event seq.
func TestListHasCreatedTimeAndGetHasTheLastEventSeq(t *testing.T) {
	_, c := singleNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.CreateSession(ctx, &dexv1.CreateSessionRequest{SessionId: "s1", Message: "go"}); err != nil {
		t.Fatal(err)
	}
	list, err := c.ListSessions(ctx, &dexv1.ListSessionsRequest{})
	if err != nil || len(list.Sessions) != 1 || list.Sessions[0].CreatedAtMs == 0 {
		t.Fatalf("list %v, %v; want s1 with its created time", list, err)
	}
	r, err := c.GetSession(ctx, &dexv1.GetSessionRequest{SessionId: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	watch, err := c.WatchSession(ctx, &dexv1.WatchSessionRequest{SessionId: "s1", AfterSeq: r.LastEventSeq - 1})
	if err != nil {
		t.Fatal(err)
	}
	if ev, err := watch.Recv(); err != nil || ev.Seq != r.LastEventSeq || r.LastEventSeq < 3 {
		t.Fatalf("event after %d: %v, %v", r.LastEventSeq-1, ev, err)
	}
}
