package archive_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/dexhq/dex/api/archive"
	"github.com/dexhq/dex/api/archive/archivetest"
	"github.com/dexhq/dex/api/archive/format"
	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// The leader's state and the API give the same bytes for the same
// session: a history over several GetSession pages, Steps with failed and
// succeeded attempts, an inbox, events some of which were dropped.
func TestFromAPI_GivesTheBytesOfFromState(t *testing.T) {
	c := archivetest.Start(t)
	c.Busy("s1", 4)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	fromState, err := archive.FromState(c.Node.State(), "s1")
	if err != nil {
		t.Fatal(err)
	}
	fromAPI, err := archive.FromAPI(ctx, client.New(c.Conn), "s1")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fromState, fromAPI) {
		a, _ := format.Decode(fromState)
		b, derr := format.Decode(fromAPI)
		t.Fatalf("the state gave %d bytes, the API %d\nstate: %v\napi:   %v (%v)", len(fromState), len(fromAPI), summary(a), summary(b), derr)
	}
	again, err := archive.FromState(c.Node.State(), "s1")
	if err != nil || !bytes.Equal(fromState, again) {
		t.Fatal("two reads of the unchanged state gave different bytes")
	}

	s, err := format.Decode(fromState)
	if err != nil {
		t.Fatal(err)
	}
	size := 0
	for _, h := range s.Session.History {
		size += proto.Size(h)
	}
	if size <= 1<<20 || len(s.Session.History) != int(s.Session.HistoryCount) {
		t.Fatalf("the archive holds %d history entries (%d bytes) of %d; want all of them, over one page of 1 MiB", len(s.Session.History), size, s.Session.HistoryCount)
	}
	if len(s.Session.Inbox) != 1 || s.Session.Inbox[0].Text != "and another" {
		t.Fatalf("inbox %v; want the message behind the running turn", s.Session.Inbox)
	}
	if len(s.Steps) != 4*3+1 || len(s.Steps[0].Attempts) != 2 || s.Steps[0].Attempts[0].ErrorType != dexv1.ErrorType_ERROR_TYPE_RATE_LIMIT {
		t.Fatalf("Steps %v; want 13, the first with a failed and a succeeded attempt", summary(s))
	}
	log := c.Node.State().EventLog("s1")
	if log.DroppedThrough == 0 || uint64(len(s.Events)) != log.Count || s.LastEventSeq != log.LastSeq || s.Events[len(s.Events)-1].Seq != log.LastSeq {
		t.Fatalf("%d events up to %d; want the %d kept up to %d (some dropped)", len(s.Events), s.LastEventSeq, log.Count, log.LastSeq)
	}
}

func summary(s *dexv1.ArchivedSession) map[string]any {
	if s == nil {
		return nil
	}
	return map[string]any{"history": len(s.Session.GetHistory()), "inbox": len(s.Session.GetInbox()), "steps": len(s.Steps), "folded": len(s.FoldedTurns),
		"events": len(s.Events), "last_event": s.LastEventSeq}
}

func TestFromStateAndFromAPI_AnUnknownSessionIsNotFound(t *testing.T) {
	c := archivetest.Start(t)
	if _, err := archive.FromState(c.Node.State(), "nobody"); !errors.Is(err, archive.ErrNotFound) {
		t.Fatalf("FromState: %v; want ErrNotFound", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := archive.FromAPI(ctx, client.New(c.Conn), "nobody"); !errors.Is(err, archive.ErrNotFound) {
		t.Fatalf("FromAPI: %v; want ErrNotFound", err)
	}
}

// What the leader will do before it deletes a session: read it from the
// state, write it, and read back the same bytes.
func TestFromState_PutAndGetInAFileArchive(t *testing.T) {
	c := archivetest.Start(t)
	c.Idle("s2")
	obj, err := archive.FromState(c.Node.State(), "s2")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	store, err := archive.Open(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := store.Put(ctx, "s2", obj); err != nil {
		t.Fatal(err)
	}
	got, err := store.Get(ctx, "s2")
	if err != nil || !bytes.Equal(got, obj) {
		t.Fatalf("Get: %d bytes, %v; want the %d written", len(got), err, len(obj))
	}
}

// A session whose older turns were folded is archived with its folded
// turns, after its Steps, and the state and the API give the same bytes.
func TestFromAPI_GivesTheBytesOfFromStateWithFoldedTurns(t *testing.T) {
	c := archivetest.Start(t)
	c.Busy("s1", 6)
	c.Fold(2)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fromState, err := archive.FromState(c.Node.State(), "s1")
	if err != nil {
		t.Fatal(err)
	}
	fromAPI, err := archive.FromAPI(ctx, client.New(c.Conn), "s1")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fromState, fromAPI) {
		a, _ := format.Decode(fromState)
		b, derr := format.Decode(fromAPI)
		t.Fatalf("the state gave %d bytes, the API %d\nstate: %v\napi:   %v (%v)", len(fromState), len(fromAPI), summary(a), summary(b), derr)
	}
	s, err := format.Decode(fromState)
	if err != nil {
		t.Fatal(err)
	}
	// 6 turns finished, the last 2 keep their Steps (3 each) and the turn
	// under way its RunModel.
	if len(s.FoldedTurns) != 4 || len(s.Steps) != 2*3+1 || s.Session.FoldedThroughTurn != 4 || s.Session.FoldedSteps != 12 {
		t.Fatalf("archived %d folded turns and %d Steps (session folded through %d, %d Steps); want 4 and 7",
			len(s.FoldedTurns), len(s.Steps), s.Session.FoldedThroughTurn, s.Session.FoldedSteps)
	}
	for i, f := range s.FoldedTurns {
		if f.Turn != uint64(i+1) || f.Steps != 3 || f.Attempts != 4 || f.LastOutcome != dexv1.Outcome_OUTCOME_SUCCEEDED {
			t.Fatalf("folded turn %d: %v; want 3 Steps, 4 attempts (one retried), succeeded", i+1, f)
		}
	}
	if len(s.Session.History) != int(s.Session.HistoryCount) {
		t.Fatalf("history %d of %d: folding keeps every entry", len(s.Session.History), s.Session.HistoryCount)
	}
	whole, err := client.New(c.Conn).GetSession(ctx, "s1")
	if err != nil || len(whole.FoldedTurns) != 4 || len(whole.Steps) != 7 {
		t.Fatalf("the client's whole GetSession: %d folded turns, %d Steps, %v; want 4 and 7", len(whole.GetFoldedTurns()), len(whole.GetSteps()), err)
	}
}
