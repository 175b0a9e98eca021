package soak

import (
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/dexhq/dex/api/archive/format"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

const (
	lifeStartMs = 1_700_000_000_000
	lifeRet     = time.Second
)

// exportOf is the archived form of a session as the API shows it.
func exportOf(t *testing.T, r *dexv1.GetSessionResponse) []byte {
	t.Helper()
	obj, err := format.Encode(&dexv1.ArchivedSession{Session: proto.Clone(r.Session).(*dexv1.Session), Steps: r.Steps, LastEventSeq: r.LastEventSeq})
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

// lifecycleInput is cleanInput in the lifecycle mode: s1 is closed at
// 200 ms, seen closed and exported, then seen gone 2 s later (its
// retention is 1 s) and is in the archive as it was exported; the final
// state no longer holds it.
func lifecycleInput(t *testing.T) CheckInput {
	in := cleanInput()
	final := proto.Clone(in.Final["s1"]).(*dexv1.GetSessionResponse)
	final.Session.Status = dexv1.SessionStatus_SESSION_STATUS_CLOSED
	final.Session.ClosedAtMs = lifeStartMs + 200
	ms := int64(time.Millisecond)
	in.Ops = append(in.Ops,
		Op{Client: 0, Kind: OpClose, Session: "s1", Call: 150 * ms, Return: 160 * ms, Answer: AnsOK},
		Op{Client: 0, Kind: OpRead, Session: "s1", Call: 300 * ms, Return: 310 * ms, Answer: AnsOK, Keys: []string{"k1", "k2", "k3"}, HistoryLen: 5, EventSeq: 11,
			Status: dexv1.SessionStatus_SESSION_STATUS_CLOSED.String()},
		Op{Client: 1, Kind: OpRead, Session: "s1", Call: 2300 * ms, Return: 2310 * ms, Answer: AnsRefused, Code: "NotFound"},
	)
	export := exportOf(t, final)
	in.Final = map[string]*dexv1.GetSessionResponse{}
	in.Life = &LifecycleInput{
		Retention: lifeRet, StartUnixMs: lifeStartMs, FinalAt: 3 * time.Second,
		Closed:  map[string]*ClosedSession{"s1": {ClosedAtMs: final.Session.ClosedAtMs, SeenAt: 310 * time.Millisecond, Export: export}},
		Archive: map[string][]byte{"s1": export}, ArchiveErr: map[string]string{},
	}
	return in
}

func TestLifecycleAcceptsAClosedSessionDeletedAfterItsRetention(t *testing.T) {
	res := Check(lifecycleInput(t))
	if len(res.Violations) > 0 || res.Linearizable != "Ok" {
		t.Fatalf("a closed session deleted after its retention is reported: %+v (linearizable %s)", res.Violations, res.Linearizable)
	}
	c := res.Lifecycle
	if c == nil || c.Closed != 1 || c.Deleted != 1 || c.ArchiveDue != 1 || c.ArchiveSameAs != 1 {
		t.Fatalf("counts %+v", c)
	}
	// Its writes and executions are judged against its export.
	if res.Checked.AckedWrites != 2 || res.Checked.Calls != 1 {
		t.Fatalf("checked %+v", res.Checked)
	}
}

func TestLifecycleFlagsASessionDeletedWhileOpen(t *testing.T) {
	in := lifecycleInput(t)
	in.Ops = slices.DeleteFunc(in.Ops, func(op Op) bool { return op.Kind == OpClose || op.Status != "" })
	delete(in.Life.Closed, "s1")
	res := Check(in)
	if !slices.Contains(kinds(res.Violations), VDeletedOpen) || res.Linearizable != "Illegal" {
		t.Fatalf("a session deleted while open: %+v (linearizable %s)", res.Violations, res.Linearizable)
	}
}

func TestLifecycleFlagsASessionMissingFromTheFinalStateWithoutAClose(t *testing.T) {
	in := cleanInput()
	in.Final = map[string]*dexv1.GetSessionResponse{}
	in.Life = &LifecycleInput{Retention: lifeRet, StartUnixMs: lifeStartMs, FinalAt: time.Second, Closed: map[string]*ClosedSession{}}
	res := Check(in)
	if !slices.Contains(kinds(res.Violations), VDeletedOpen) {
		t.Fatalf("a session gone from the final state, never closed: %+v", res.Violations)
	}
}

func TestLifecycleFlagsASessionDeletedBeforeItsRetention(t *testing.T) {
	in := lifecycleInput(t)
	last := &in.Ops[len(in.Ops)-1] // the NotFound read, now 500 ms after the close
	last.Call, last.Return = int64(700*time.Millisecond), int64(710*time.Millisecond)
	res := Check(in)
	if !slices.Contains(kinds(res.Violations), VDeletedEarly) {
		t.Fatalf("a session deleted 510 ms after it closed with a retention of 1s: %+v", res.Violations)
	}
	// Without the close time the cluster gave, the close's call bounds it.
	in.Life.Closed = map[string]*ClosedSession{}
	in.Life.Archive = map[string][]byte{}
	if res := Check(in); !slices.Contains(kinds(res.Violations), VDeletedEarly) {
		t.Fatalf("deleted 550 ms after its close was asked for: %+v", res.Violations)
	}
}

func TestLifecycleFlagsAnArchivedObjectThatDiffers(t *testing.T) {
	in := lifecycleInput(t)
	other := proto.Clone(cleanInput().Final["s1"]).(*dexv1.GetSessionResponse)
	other.Session.Status = dexv1.SessionStatus_SESSION_STATUS_CLOSED
	other.Session.History = other.Session.History[:3] // an entry lost on the way to the archive
	in.Life.Archive["s1"] = exportOf(t, other)
	res := Check(in)
	if !slices.Equal(kinds(res.Violations), []string{VArchiveDiffers}) {
		t.Fatalf("an archived object that differs from the export: %+v", res.Violations)
	}
	in = lifecycleInput(t)
	delete(in.Life.Archive, "s1")
	in.Life.ArchiveErr["s1"] = "sessions/s1.dexsession: checksum mismatch"
	if res := Check(in); !slices.Equal(kinds(res.Violations), []string{VArchiveDiffers}) {
		t.Fatalf("an archived object that does not verify: %+v", res.Violations)
	}
}

func TestLifecycleFlagsAMissingArchiveObject(t *testing.T) {
	in := lifecycleInput(t)
	delete(in.Life.Archive, "s1")
	res := Check(in)
	if !slices.Equal(kinds(res.Violations), []string{VArchiveMissing}) {
		t.Fatalf("a deleted session not in the archive: %+v", res.Violations)
	}

	// Not deleted yet, but closed longer than the retention (and the
	// slack) before the final reads: due all the same.
	in = lifecycleInput(t)
	in.Ops = in.Ops[:len(in.Ops)-1]
	in.Final = cleanInput().Final
	in.Final["s1"].Session.Status = dexv1.SessionStatus_SESSION_STATUS_CLOSED
	in.Life.FinalAt = time.Second + archiveSlack + time.Second
	delete(in.Life.Archive, "s1")
	if res := Check(in); !slices.Equal(kinds(res.Violations), []string{VArchiveMissing}) {
		t.Fatalf("a session closed before the last retention window, not in the archive: %+v", res.Violations)
	}
	// Closed within the last retention window: it need not be there yet.
	in.Life.FinalAt = time.Second
	if res := Check(in); len(res.Violations) > 0 {
		t.Fatalf("a session closed within the last retention window: %+v", res.Violations)
	}
}

func TestSessionModelKnowsCloses(t *testing.T) {
	created := sessionState{created: true, keys: "k1"}
	closed := created
	closed.closed = true
	if got := sessionStep(created, Op{Kind: OpRead, Answer: AnsRefused, Code: "NotFound"}); got != nil {
		t.Fatalf("NotFound for an open session: %v", got)
	}
	if got := sessionStep(closed, Op{Kind: OpRead, Answer: AnsRefused, Code: "NotFound"}); len(got) != 1 || !got[0].gone {
		t.Fatalf("NotFound for a closed session: %v", got)
	}
	if got := sessionStep(sessionState{created: true, closed: true, gone: true}, Op{Kind: OpRead, Answer: AnsOK, Keys: []string{"k1"}}); got != nil {
		t.Fatalf("a deleted session read back: %v", got)
	}
	if got := sessionStep(closed, Op{Kind: OpSend, Key: "k2", Answer: AnsOK}); got != nil {
		t.Fatalf("a closed session took a message: %v", got)
	}
	if got := sessionStep(created, Op{Kind: OpRead, Answer: AnsOK, Keys: []string{"k1"}, Status: dexv1.SessionStatus_SESSION_STATUS_CLOSED.String()}); got != nil {
		t.Fatalf("a session read closed with no close: %v", got)
	}
	if got := sessionStep(created, Op{Kind: OpClose, Answer: AnsUnknown}); len(got) != 2 {
		t.Fatalf("an unanswered close may or may not have happened: %v", got)
	}
}
