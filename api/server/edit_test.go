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

func TestEditHistory_CodesAndTheSpliceAnOperatorSees(t *testing.T) {
	_, c := singleNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.CreateSession(ctx, &dexv1.CreateSessionRequest{SessionId: "busy", Message: "go"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateSession(ctx, &dexv1.CreateSessionRequest{SessionId: "quiet"}); err != nil {
		t.Fatal(err)
	}
	huge := strings.Repeat("x", DefaultMaxPayload/2)
	for _, tc := range []struct {
		req  *dexv1.EditHistoryRequest
		code codes.Code
		msg  string
	}{
		{&dexv1.EditHistoryRequest{Note: "n"}, codes.InvalidArgument, "session_id is required"},
		{&dexv1.EditHistoryRequest{SessionId: "quiet"}, codes.InvalidArgument, "an edit names truncate_from_seq, a note, or both"},
		{&dexv1.EditHistoryRequest{SessionId: "quiet", Note: huge}, codes.ResourceExhausted, "over this cluster's limit"},
		{&dexv1.EditHistoryRequest{SessionId: "nobody", Note: "n"}, codes.NotFound, `session "nobody" not found`},
		{&dexv1.EditHistoryRequest{SessionId: "busy", Note: "n"}, codes.FailedPrecondition, "session busy is running: edit its history when it is idle, errored or paused"},
		{&dexv1.EditHistoryRequest{SessionId: "quiet", TruncateFromSeq: 5}, codes.InvalidArgument, "session quiet has no history entry at seq 5"},
	} {
		_, err := c.EditHistory(ctx, tc.req)
		if status.Code(err) != tc.code || !strings.Contains(status.Convert(err).Message(), tc.msg) {
			t.Fatalf("edit %+v: %v; want %s %q", tc.req.SessionId, err, tc.code, tc.msg)
		}
	}
	res, err := c.EditHistory(ctx, &dexv1.EditHistoryRequest{SessionId: "quiet", Note: "keep it short"})
	if err != nil || res.HistoryCount != 1 || res.HistorySize == 0 {
		t.Fatalf("a note: %v, %v", res, err)
	}
	res, err = c.EditHistory(ctx, &dexv1.EditHistoryRequest{SessionId: "quiet", TruncateFromSeq: 1, Note: "start over"})
	if err != nil || res.HistoryCount != 1 {
		t.Fatalf("a splice: %v, %v", res, err)
	}
	got, err := c.GetSession(ctx, &dexv1.GetSessionRequest{SessionId: "quiet"})
	if err != nil || len(got.Session.History) != 1 || got.Session.History[0].Text != "start over" {
		t.Fatalf("the history after the splice: %v, %v", got.GetSession().GetHistory(), err)
	}
}

func TestResumeSession_ChoiceIsChecked(t *testing.T) {
	_, c := singleNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.CreateSession(ctx, &dexv1.CreateSessionRequest{SessionId: "quiet"}); err != nil {
		t.Fatal(err)
	}
	_, err := c.ResumeSession(ctx, &dexv1.ResumeSessionRequest{SessionId: "quiet", Choice: dexv1.ResumeChoice_RESUME_CHOICE_DROP})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "session quiet is idle: only a paused or errored session can be resumed") {
		t.Fatalf("resume of an idle session: %v", err)
	}
}
