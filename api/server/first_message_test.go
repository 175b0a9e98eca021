package server

import (
	"context"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	"github.com/dexhq/dex/api/archive/format"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// pausedBeforeItsTurnArchive is the archive object of a session paused
// before its first turn: no history, one message waiting in its inbox.
func pausedBeforeItsTurnArchive(t *testing.T, id, text string) []byte {
	t.Helper()
	obj, err := format.Encode(&dexv1.ArchivedSession{
		Session: &dexv1.Session{
			Id: id, Status: dexv1.SessionStatus_SESSION_STATUS_PAUSED, PauseReason: dexv1.PauseReason_PAUSE_REASON_BUDGET,
			NextStep: 1, NextTurn: 1, NextHistory: 1, NextInbox: 2, InboxCount: 1, CreatedAtMs: 1000, UpdatedAtMs: 2000,
			RetentionMs: proto.Int64(time.Hour.Milliseconds()),
			Inbox:       []*dexv1.Message{{Id: "m1", Text: text, SessionId: id, Seq: 1, ReceivedAtMs: 1000}},
		},
		LastEventSeq: 3,
		Events:       []*dexv1.Event{{Seq: 3, SessionId: id, Type: "session_paused", Ordinal: 2, AtMs: 2000}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

// The list shows each session's first message: the first user entry of
// its history, cut to 200 bytes without splitting a character; the inbox's
// first message when its turn has not started; nothing when it has none.
func TestListSessionsCarriesTheFirstMessage(t *testing.T) {
	_, c := singleNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// "é" is two bytes: the 199th and 200th byte of the message, with the
	// 200-byte cut between them.
	long := strings.Repeat("a", firstMessageBytes-1) + "é and more after the cut"
	if _, err := c.CreateSession(ctx, &dexv1.CreateSessionRequest{SessionId: "long", Message: long}); err != nil {
		t.Fatal(err)
	}
	// A later message does not replace the first.
	if _, err := c.SendMessage(ctx, &dexv1.SendMessageRequest{SessionId: "long", IdempotencyKey: "m2", Text: "second"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateSession(ctx, &dexv1.CreateSessionRequest{SessionId: "none"}); err != nil {
		t.Fatal(err)
	}
	if _, err := importObject(ctx, c, pausedBeforeItsTurnArchive(t, "waiting", "hello from the inbox"), 1<<20); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"long": strings.Repeat("a", firstMessageBytes-1), "none": "", "waiting": "hello from the inbox"}
	for _, req := range []*dexv1.ListSessionsRequest{{}, {OrderBy: dexv1.SessionOrder_SESSION_ORDER_UPDATED, Descending: true}} {
		list, err := c.ListSessions(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Sessions) != len(want) {
			t.Fatalf("%v: %d sessions listed, want %d", req, len(list.Sessions), len(want))
		}
		for _, s := range list.Sessions {
			if s.FirstMessage != want[s.Id] || !utf8.ValidString(s.FirstMessage) {
				t.Errorf("%v: session %s first message %q (%d bytes), want %q", req, s.Id, s.FirstMessage, len(s.FirstMessage), want[s.Id])
			}
			if paused := s.Id == "waiting"; paused != (s.PauseReason == dexv1.PauseReason_PAUSE_REASON_BUDGET) {
				t.Errorf("session %s (%v) listed with pause reason %v", s.Id, s.Status, s.PauseReason)
			}
		}
	}
}

func TestCutUTF8KeepsWholeCharacters(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 200, "short"},
		{"abc", 3, "abc"},
		{"abé", 3, "ab"},  // é is bytes 3-4
		{"ab€x", 4, "ab"}, // € is bytes 3-5
		{"ab€x", 5, "ab€"},
		{"€", 2, ""},
	} {
		if got := cutUTF8(c.in, c.n); got != c.want {
			t.Errorf("cutUTF8(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}
