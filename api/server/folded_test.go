package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/dexhq/dex/api/archive/archivetest"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// GetSession shows a session's folded turns a page at a time, in turn
// order, with the page of Steps it keeps; a page past them is empty.
func TestGetSession_PagesFoldedTurns(t *testing.T) {
	c := archivetest.Start(t)
	c.Idle("s1")
	c.Busy("long", 5)
	c.Fold(1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	svc := dexv1.NewSessionServiceClient(c.Conn)
	var turns []uint64
	req := &dexv1.GetSessionRequest{SessionId: "long", StepsLimit: 3}
	for pages := 0; ; pages++ {
		resp, err := svc.GetSession(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.FoldedTurns) > 3 {
			t.Fatalf("a page of %d folded turns; want at most steps_limit 3", len(resp.FoldedTurns))
		}
		for _, f := range resp.FoldedTurns {
			turns = append(turns, f.Turn)
			if f.SessionId != "long" || f.Steps != 3 || f.Attempts != 4 || len(f.Kinds) != 2 {
				t.Fatalf("folded turn %v", f)
			}
		}
		if resp.NextFoldedAfterTurn == 0 {
			if resp.Session.FoldedThroughTurn != 4 || resp.Session.FoldedSteps != 12 {
				t.Fatalf("session folded through %d, %d Steps; want 4 and 12", resp.Session.FoldedThroughTurn, resp.Session.FoldedSteps)
			}
			break
		}
		if pages > 3 {
			t.Fatal("the pages of folded turns do not end")
		}
		req.FoldedAfterTurn = resp.NextFoldedAfterTurn
	}
	if len(turns) != 4 || turns[0] != 1 || turns[3] != 4 {
		t.Fatalf("folded turns read: %v; want 1..4", turns)
	}
	resp, err := svc.GetSession(ctx, &dexv1.GetSessionRequest{SessionId: "long", FoldedAfterTurn: 4})
	if err != nil || len(resp.FoldedTurns) != 0 || resp.NextFoldedAfterTurn != 0 {
		t.Fatalf("a page after the last folded turn: %v, %v", resp.GetFoldedTurns(), err)
	}
	if n := len(resp.Steps); n != 3+1 {
		t.Fatalf("%d Steps kept; want the last finished turn's 3 and the running RunModel", n)
	}
	small, err := svc.GetSession(ctx, &dexv1.GetSessionRequest{SessionId: "s1"})
	if err != nil || len(small.FoldedTurns) != 0 || small.Session.FoldedThroughTurn != 0 {
		t.Fatalf("a one-turn session shows folded turns: %v, %v", small.GetFoldedTurns(), err)
	}
}
