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

func TestLimits_WhatTheClusterCannotDeliverIsRefusedAndChangesNothing(t *testing.T) {
	node, c := singleNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l := LimitsFor(DefaultMaxPayload)
	big := strings.Repeat("x", l.MaxMessage+1)

	_, err := c.CreateSession(ctx, &dexv1.CreateSessionRequest{SessionId: "big", Message: big})
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "over this cluster's limit") {
		t.Fatalf("a first message over the limit: %v; want ResourceExhausted naming the limit", err)
	}
	_, err = c.CreateSession(ctx, &dexv1.CreateSessionRequest{SessionId: "cfg", CompactionThreshold: l.MaxModelInput + 1})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a compaction threshold over the model input limit: %v; want InvalidArgument", err)
	}
	if node.State().Session("big") != nil || node.State().Session("cfg") != nil {
		t.Fatal("a refused CreateSession left a session behind")
	}

	resp, err := c.CreateSession(ctx, &dexv1.CreateSessionRequest{SessionId: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if s := resp.Session; s.CompactionThreshold != l.DefaultCompactionThreshold || s.MaxModelInput != l.MaxModelInput {
		t.Fatalf("a new session compacts at %d with input limit %d; want the defaults %d and %d",
			s.CompactionThreshold, s.MaxModelInput, l.DefaultCompactionThreshold, l.MaxModelInput)
	}
	before := node.State().Session("s")
	_, err = c.SendMessage(ctx, &dexv1.SendMessageRequest{SessionId: "s", Text: big, IdempotencyKey: "k1"})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a message over the limit: %v; want ResourceExhausted", err)
	}
	if after := node.State().Session("s"); after.InboxCount != before.InboxCount || after.HistoryCount != before.HistoryCount {
		t.Fatal("a refused message reached the session")
	}
	// The largest message accepted is delivered and shown.
	if _, err := c.SendMessage(ctx, &dexv1.SendMessageRequest{SessionId: "s", Text: big[1:], IdempotencyKey: "k2"}); err != nil {
		t.Fatal(err)
	}
	got, err := c.GetSession(ctx, &dexv1.GetSessionRequest{SessionId: "s"})
	if err != nil {
		t.Fatalf("a session holding the largest message cannot be read: %v", err)
	}
	if n := len(got.Session.History); n != 1 || len(got.Session.History[0].Text) != l.MaxMessage {
		t.Fatalf("the session shows %d history entries; want the one message of %d bytes", n, l.MaxMessage)
	}
}

func TestGetSession_PagesTheHistoryAndListSessionsPagesTheSessions(t *testing.T) {
	_, c := singleNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, id := range []string{"a", "b", "c"} {
		if _, err := c.CreateSession(ctx, &dexv1.CreateSessionRequest{SessionId: id, Message: "hello " + id}); err != nil {
			t.Fatal(err)
		}
	}
	page, err := c.ListSessions(ctx, &dexv1.ListSessionsRequest{PageSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Sessions) != 2 || page.NextPageToken != "b" {
		t.Fatalf("first page: %d sessions, next %q; want 2 and \"b\"", len(page.Sessions), page.NextPageToken)
	}
	last, err := c.ListSessions(ctx, &dexv1.ListSessionsRequest{PageSize: 2, PageToken: page.NextPageToken})
	if err != nil {
		t.Fatal(err)
	}
	if len(last.Sessions) != 1 || last.Sessions[0].Id != "c" || last.NextPageToken != "" {
		t.Fatalf("last page: %v, next %q", last.Sessions, last.NextPageToken)
	}
	got, err := c.GetSession(ctx, &dexv1.GetSessionRequest{SessionId: "a", HistoryLimit: 1, StepsLimit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Session.History) != 1 || got.NextHistoryAfterSeq != 0 || len(got.Steps) != 1 || got.NextStepsAfter != 0 {
		t.Fatalf("one entry, one Step: got %d (next %d) and %d (next %d)", len(got.Session.History), got.NextHistoryAfterSeq, len(got.Steps), got.NextStepsAfter)
	}
}
