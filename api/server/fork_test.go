package server

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/wirerules"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

func TestForkSession_CopiesTheHistoryAndListsTheFork(t *testing.T) {
	_, c := singleNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.CreateSession(ctx, &dexv1.CreateSessionRequest{SessionId: "src", Agent: "coder", Labels: apiLabels("team", "red")}); err != nil {
		t.Fatal(err)
	}
	// An idle session's history grows by an operator's notes.
	for _, n := range []string{"one", "two", "three"} {
		if _, err := c.EditHistory(ctx, &dexv1.EditHistoryRequest{SessionId: "src", Note: n}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := c.ForkSession(ctx, &dexv1.ForkSessionRequest{SourceSessionId: "src", AtSeq: 2, SessionId: "f1"})
	if err != nil {
		t.Fatal(err)
	}
	f := res.Session
	if f.Id != "f1" || f.ForkedFrom != "src" || f.ForkedAtSeq != 2 || f.Agent != "coder" || labelString(f.Labels) != "team=red" ||
		f.Status != dexv1.SessionStatus_SESSION_STATUS_IDLE || f.HistoryCount != 2 {
		t.Fatalf("the fork answered: %v", f)
	}
	got, err := c.GetSession(ctx, &dexv1.GetSessionRequest{SessionId: "f1"})
	if err != nil || len(got.Session.History) != 2 || got.Session.History[1].Text != "two" {
		t.Fatalf("the fork's history: %v, %v", got.GetSession().GetHistory(), err)
	}
	// With a message and labels of its own, a fork starts a turn; its id is
	// drawn when none is given.
	res, err = c.ForkSession(ctx, &dexv1.ForkSessionRequest{SourceSessionId: "src", AtSeq: 3, Message: "go on", Labels: apiLabels("team", "blue")})
	if err != nil {
		t.Fatal(err)
	}
	f2 := res.Session
	if f2.Id == "" || f2.Status != dexv1.SessionStatus_SESSION_STATUS_RUNNING || labelString(f2.Labels) != "team=blue" || f2.HistoryCount != 4 {
		t.Fatalf("the fork with a message answered: %v", f2)
	}
	list, err := c.ListSessions(ctx, &dexv1.ListSessionsRequest{ForkedFrom: "src"})
	if err != nil {
		t.Fatal(err)
	}
	ids := summaryIDs(list.Sessions)
	slices.Sort(ids)
	want := []string{"f1", f2.Id}
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Fatalf("the forks of src listed: %v; want %v", ids, want)
	}
	for _, s := range list.Sessions {
		if s.ForkedFrom != "src" || (s.ForkedAtSeq != 2 && s.ForkedAtSeq != 3) {
			t.Fatalf("a listed fork: %v", s)
		}
	}
}

// Every bad fork answers with its code and reason, and creates nothing.
func TestForkSession_BadInputChangesNothing(t *testing.T) {
	_, c := singleNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.CreateSession(ctx, &dexv1.CreateSessionRequest{SessionId: "busy", Message: "go"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateSession(ctx, &dexv1.CreateSessionRequest{SessionId: "quiet"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.EditHistory(ctx, &dexv1.EditHistoryRequest{SessionId: "quiet", Note: "n"}); err != nil {
		t.Fatal(err)
	}
	huge := strings.Repeat("x", DefaultMaxPayload/2)
	for _, tc := range []struct {
		req  *dexv1.ForkSessionRequest
		code codes.Code
		msg  string
	}{
		{&dexv1.ForkSessionRequest{AtSeq: 1}, codes.InvalidArgument, "source_session_id is required"},
		{&dexv1.ForkSessionRequest{SourceSessionId: "nobody", AtSeq: 1}, codes.NotFound, `session "nobody" not found`},
		{&dexv1.ForkSessionRequest{SourceSessionId: "quiet"}, codes.InvalidArgument, "at_seq is required"},
		{&dexv1.ForkSessionRequest{SourceSessionId: "quiet", AtSeq: 7}, codes.InvalidArgument, "session quiet has no history entry 7: its entries go up to 1"},
		{&dexv1.ForkSessionRequest{SourceSessionId: "busy", AtSeq: 1}, codes.FailedPrecondition,
			"entry 1 of session busy is inside turn 1, which has not ended (the session is running)"},
		{&dexv1.ForkSessionRequest{SourceSessionId: "quiet", AtSeq: 1, Labels: apiLabels("NO", "x")}, codes.InvalidArgument, `label key "NO"`},
		{&dexv1.ForkSessionRequest{SourceSessionId: "quiet", AtSeq: 1, Agent: "no agent"}, codes.InvalidArgument, "agent"},
		{&dexv1.ForkSessionRequest{SourceSessionId: "quiet", AtSeq: 1, SessionId: "busy"}, codes.AlreadyExists, `session "busy" already exists`},
		{&dexv1.ForkSessionRequest{SourceSessionId: "quiet", AtSeq: 1, Message: huge}, codes.ResourceExhausted, "over this cluster's limit"},
	} {
		_, err := c.ForkSession(ctx, tc.req)
		if status.Code(err) != tc.code || !strings.Contains(status.Convert(err).Message(), tc.msg) {
			t.Fatalf("fork %+v: %v; want %s %q", tc.req.SourceSessionId, err, tc.code, tc.msg)
		}
	}
	list, err := c.ListSessions(ctx, &dexv1.ListSessionsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if ids := summaryIDs(list.Sessions); !slices.Equal(ids, []string{"busy", "quiet"}) {
		t.Fatalf("after the refused forks the sessions are %v", ids)
	}
}

// In a rolling upgrade, while a member runs a Dex that cannot apply a
// fork's commands, a fork is refused and nothing is proposed.
func TestForkSession_RefusedWhileAMemberCannotApplyIt(t *testing.T) {
	node, c := singleNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.CreateSession(ctx, &dexv1.CreateSessionRequest{SessionId: "src"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.EditHistory(ctx, &dexv1.EditHistoryRequest{SessionId: "src", Note: "n"}); err != nil {
		t.Fatal(err)
	}
	self := proto.CloneOf(node.State().Nodes()[0])
	self.LogVersion = fsm.ForkLogVersion - 1
	if res, err := node.Propose(ctx, &fsmpb.Command{Body: &fsmpb.Command_SetNode{SetNode: &fsmpb.SetNode{Node: self}}}); err != nil || res.Err != nil {
		t.Fatalf("record the node at an older log version: %v %v", err, res.Err)
	}
	applied := node.State().Meta().AppliedIndex
	_, err := c.ForkSession(ctx, &dexv1.ForkSessionRequest{SourceSessionId: "src", AtSeq: 1, SessionId: "f"})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(status.Convert(err).Message(), "upgrade every node") {
		t.Fatalf("fork with an older member: %v; want FailedPrecondition naming the upgrade", err)
	}
	if got := node.State().Meta().AppliedIndex; got != applied || node.State().Session("f") != nil {
		t.Fatalf("a refused fork proposed %d commands", got-applied)
	}
}

// In a partitioned cluster a fork's id must live in its source's
// partition, which serves the call.
func TestPlaceFork_IDOfAnotherPartitionRefused(t *testing.T) {
	s := &Sessions{partition: 1, partitions: 3}
	id := "a"
	for wirerules.PartitionOf(id, 3) == 1 {
		id += "a"
	}
	_, err := s.placeFork(&dexv1.ForkSessionRequest{SourceSessionId: "src", SessionId: id})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "a fork lives in its source's partition") {
		t.Fatalf("an id of partition %d: %v", wirerules.PartitionOf(id, 3), err)
	}
	drawn, err := s.placeFork(&dexv1.ForkSessionRequest{SourceSessionId: "src"})
	if err != nil || wirerules.PartitionOf(drawn, 3) != 1 {
		t.Fatalf("a drawn id %q (partition %d), %v; want one of partition 1", drawn, wirerules.PartitionOf(drawn, 3), err)
	}
	if _, err := s.placeFork(&dexv1.ForkSessionRequest{SourceSessionId: "src", SessionId: strings.Repeat("x", 1000)}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("an id too long: %v", err)
	}
}
