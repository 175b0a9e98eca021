package format

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// sample is a session with some of everything an archive holds.
func sample() *dexv1.ArchivedSession {
	return &dexv1.ArchivedSession{
		Session: &dexv1.Session{
			Id: "s1", Status: dexv1.SessionStatus_SESSION_STATUS_IDLE, Agent: "coder@2", TurnsCompleted: 2, HistoryCount: 3,
			History: []*dexv1.HistoryEntry{
				{Seq: 1, Kind: dexv1.HistoryKind_HISTORY_KIND_USER, Text: "hi", SessionId: "s1"},
				{Seq: 2, Kind: dexv1.HistoryKind_HISTORY_KIND_ASSISTANT, ToolCalls: []*dexv1.ToolCall{{CallId: "c1", Tool: "grep", Arguments: `{"q":"x"}`}}},
				{Seq: 4, Kind: dexv1.HistoryKind_HISTORY_KIND_TOOL_RESULT, CallId: "c1", Outcome: dexv1.Outcome_OUTCOME_SUCCEEDED, Text: "found"},
			},
			Inbox: []*dexv1.Message{{Id: "m9", Text: "later", Seq: 3}},
		},
		LastEventSeq: 12,
		Steps: []*dexv1.Step{
			{Id: "s1-s1", Number: 1, Kind: dexv1.StepKind_STEP_KIND_RUN_MODEL, Status: dexv1.StepStatus_STEP_STATUS_DONE, Attempts: []*dexv1.Attempt{
				{N: 1, WorkerId: "w1", Status: dexv1.AttemptStatus_ATTEMPT_STATUS_FAILED, ErrorType: dexv1.ErrorType_ERROR_TYPE_RATE_LIMIT, Error: "slow down"},
				{N: 2, WorkerId: "w2", Status: dexv1.AttemptStatus_ATTEMPT_STATUS_SUCCEEDED},
			}},
			{Id: "s1-s2", Number: 2, Kind: dexv1.StepKind_STEP_KIND_CALL_TOOL, Tool: "grep", Status: dexv1.StepStatus_STEP_STATUS_DONE, Outcome: dexv1.Outcome_OUTCOME_SUCCEEDED},
		},
		FoldedTurns: []*dexv1.FoldedTurn{
			{SessionId: "s1", Turn: 1, Steps: 3, Attempts: 4, FirstStep: 1, LastStep: 3, Kinds: []*dexv1.FoldedKind{{Kind: dexv1.StepKind_STEP_KIND_RUN_MODEL, Steps: 2, Attempts: 3}}},
			{SessionId: "s1", Turn: 2, Steps: 1, Attempts: 1, FirstStep: 4, LastStep: 4, LastOutcome: dexv1.Outcome_OUTCOME_SUCCEEDED},
		},
		Events: []*dexv1.Event{{Seq: 11, SessionId: "s1", Type: "turn_started"}, {Seq: 12, SessionId: "s1", Type: "turn_completed"}},
	}
}

func TestEncode_RoundTripsTheWholeSession(t *testing.T) {
	want := sample()
	obj, err := Encode(want)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(obj, []byte(Magic)) {
		t.Fatalf("the object begins %q; want the line %q", obj[:min(len(obj), 30)], Magic)
	}
	got, err := Decode(obj)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, want) {
		t.Fatalf("decoded\n%v\nwant\n%v", got, want)
	}
}

func TestEncode_TheSameSessionGivesTheSameBytes(t *testing.T) {
	a, err := Encode(sample())
	if err != nil {
		t.Fatal(err)
	}
	// A copy of the session, and one whose Step carries the read-time
	// waiting reason: neither changes a byte.
	other := proto.CloneOf(sample())
	other.Steps[1].WaitingReason = "no live Worker serves tool grep"
	for _, s := range []*dexv1.ArchivedSession{proto.CloneOf(sample()), other} {
		b, err := Encode(s)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Fatal("the same session encoded twice gave different bytes")
		}
	}
	changed := sample()
	changed.Events[1].Detail = "x"
	if b, _ := Encode(changed); bytes.Equal(a, b) {
		t.Fatal("a changed session gave the same bytes")
	}
}

func TestDecode_RefusesADamagedOrTruncatedObject(t *testing.T) {
	obj, err := Encode(sample())
	if err != nil {
		t.Fatal(err)
	}
	flipped := bytes.Clone(obj)
	flipped[len(Magic)+5] ^= 0x40
	cases := map[string][]byte{
		"empty":              {},
		"cut in the magic":   obj[:7],
		"only the magic":     obj[:len(Magic)],
		"cut in the records": obj[:len(obj)/2],
		"last byte cut":      obj[:len(obj)-1],
		"one bit flipped":    flipped,
		"a byte added":       append(bytes.Clone(obj), 0),
		"another file":       []byte("PK\x03\x04 a zip file, not a session"),
	}
	for name, b := range cases {
		_, err := Decode(b)
		if !errors.Is(err, ErrDamaged) {
			t.Errorf("%s: %v; want ErrDamaged", name, err)
		}
		if Verify(b) == nil {
			t.Errorf("%s: Verify took it", name)
		}
	}
	_, err = Decode(flipped)
	if !strings.Contains(err.Error(), "SHA-256 does not match") {
		t.Errorf("a flipped bit: %v; want it to say the checksum does not match", err)
	}
}

func TestDecode_RefusesAnotherVersion(t *testing.T) {
	obj, err := Encode(sample())
	if err != nil {
		t.Fatal(err)
	}
	next := append([]byte(magicPrefix+"2\n"), obj[len(Magic):]...)
	_, err = Decode(next)
	if err == nil || !strings.Contains(err.Error(), `format "2"`) || !strings.Contains(err.Error(), "reads format 1 only") {
		t.Fatalf("a version 2 object: %v; want a clear refusal", err)
	}
}

// A writer that checksummed a wrong set of records (out of order, or an end
// record that does not count them) is refused too.
func TestDecode_RefusesRecordsOutOfOrderOrMiscounted(t *testing.T) {
	s := sample()
	e := NewEncoder()
	e.Header(s.Session, s.LastEventSeq)
	e.History(s.Session.History[1])
	e.History(s.Session.History[0])
	obj, err := e.Finish()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Decode(obj); !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "out of order") {
		t.Fatalf("history out of order: %v", err)
	}

	e = NewEncoder()
	e.Header(s.Session, s.LastEventSeq)
	e.Step(s.Steps[0])
	e.end.Steps++ // counts a Step that is not there
	if obj, err = e.Finish(); err != nil {
		t.Fatal(err)
	}
	if _, err := Decode(obj); !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "end record counts") {
		t.Fatalf("a miscounted object: %v", err)
	}

	// Folded turns come after the Steps, in turn order.
	for name, write := range map[string]func(e *Encoder){
		"a Step after a folded turn": func(e *Encoder) { e.Folded(s.FoldedTurns[0]); e.Step(s.Steps[0]) },
		"folded turns out of order":  func(e *Encoder) { e.Folded(s.FoldedTurns[1]); e.Folded(s.FoldedTurns[0]) },
		"a folded turn after events": func(e *Encoder) { e.Event(s.Events[0]); e.Folded(s.FoldedTurns[0]) },
	} {
		e = NewEncoder()
		e.Header(s.Session, s.LastEventSeq)
		write(e)
		if obj, err = e.Finish(); err != nil {
			t.Fatal(err)
		}
		if _, err := Decode(obj); !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "out of order") {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

// A server bounds what an object inflates to: past the bound it is
// refused as too large, not read on.
func TestDecodeWithin_RefusesAnObjectThatInflatesPastTheBound(t *testing.T) {
	obj, err := Encode(sample())
	if err != nil {
		t.Fatal(err)
	}
	raw := 0 // the records' size, uncompressed
	got, err := Decode(obj)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int64{1, 10, 100} {
		if _, err := DecodeWithin(obj, n); !errors.Is(err, ErrTooLarge) || errors.Is(err, ErrDamaged) {
			t.Fatalf("DecodeWithin(%d bytes): %v; want ErrTooLarge", n, err)
		}
	}
	for raw = 100; ; raw++ {
		if _, err := DecodeWithin(obj, int64(raw)); err == nil {
			break
		} else if !errors.Is(err, ErrTooLarge) {
			t.Fatalf("DecodeWithin(%d bytes): %v", raw, err)
		}
	}
	again, err := DecodeWithin(obj, int64(raw))
	if err != nil || !proto.Equal(again, got) {
		t.Fatalf("within its own size: %v", err)
	}
}

func TestSessionID_ReadsTheHeaderOnly(t *testing.T) {
	s := sample()
	obj, err := Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	if id, err := SessionID(obj); err != nil || id != s.Session.Id {
		t.Fatalf("SessionID = %q, %v; want %q", id, err, s.Session.Id)
	}
	obj[len(obj)/2] ^= 0xff
	if _, err := SessionID(obj); !errors.Is(err, ErrDamaged) {
		t.Fatalf("SessionID of a damaged object: %v", err)
	}
	if _, err := SessionID([]byte("not an archive")); !errors.Is(err, ErrDamaged) {
		t.Fatalf("SessionID of another file: %v", err)
	}
}
