package soak

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/chaos/harness"
)

// A small history that is right in every way: a session created with k1,
// a message k2 sent, a read that sees both, a single-attempt tool run once
// by the Worker its claimed attempt was handed to.
func cleanInput() CheckInput {
	ops := []Op{
		{Client: 0, Kind: OpCreate, Session: "s1", Key: "k1", Call: 0, Return: 10, Answer: AnsOK},
		{Client: 0, Kind: OpSend, Session: "s1", Key: "k2", Call: 20, Return: 30, Answer: AnsOK},
		{Client: 1, Kind: OpRead, Session: "s1", Call: 40, Return: 50, Answer: AnsOK, Keys: []string{"k1", "k2"}, HistoryLen: 4, EventSeq: 9},
		{Client: 1, Kind: OpRead, Session: "s1", Call: 60, Return: 70, Answer: AnsOK, Keys: []string{"k1", "k2"}, HistoryLen: 5, EventSeq: 11},
		// No answer: it may have happened; the final state says it did.
		{Client: 0, Kind: OpSend, Session: "s1", Key: "k3", Call: 80, Return: 90, Answer: AnsUnknown, Code: "Unavailable"},
	}
	mail := &dexv1.Step{Id: "st-mail", SessionId: "s1", Kind: dexv1.StepKind_STEP_KIND_CALL_SINGLE_ATTEMPT_TOOL, CallId: "call-2-1", Tool: "send_email", MaxAttempts: 1,
		Status: dexv1.StepStatus_STEP_STATUS_DONE, Attempts: []*dexv1.Attempt{{N: 1, WorkerId: "w1-1", Epoch: 3, ClaimedAtMs: 5}}}
	final := &dexv1.GetSessionResponse{
		Session: &dexv1.Session{Id: "s1", Status: dexv1.SessionStatus_SESSION_STATUS_IDLE, History: []*dexv1.HistoryEntry{
			{Seq: 1, Kind: dexv1.HistoryKind_HISTORY_KIND_USER, MessageId: "k1"},
			{Seq: 2, Kind: dexv1.HistoryKind_HISTORY_KIND_USER, MessageId: "k2"},
			{Seq: 3, Kind: dexv1.HistoryKind_HISTORY_KIND_TOOL_RESULT, CallId: "call-2-1", Tool: "send_email"},
			{Seq: 4, Kind: dexv1.HistoryKind_HISTORY_KIND_USER, MessageId: "k3"},
		}},
		Steps: []*dexv1.Step{mail},
	}
	ledger := []harness.LedgerEntry{{Session: "s1", CallID: "call-2-1", Tool: "send_email", Attempt: 1, Step: "st-mail", Kind: "tool", Worker: "w1-1", Epoch: 3, IdempotencyKey: "dex:s1:call-2-1"}}
	return CheckInput{Ops: ops, Ledger: ledger, Final: map[string]*dexv1.GetSessionResponse{"s1": final},
		Digests: map[string]string{"n1": "aa", "n2": "aa", "n3": "aa"}, DigestIndex: 42, LinearizeTimeout: 10 * time.Second,
		Restart: cleanRestart(), Backups: []BackupCheck{{File: "b1", Index: 30, Sessions: 1}, {File: "b2", Index: 42, Sessions: 1}}}
}

func kinds(vs []Violation) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Kind)
	}
	return out
}

func TestCheckPassesAConsistentRun(t *testing.T) {
	res := Check(cleanInput())
	if len(res.Violations) > 0 || res.Linearizable != "Ok" {
		t.Fatalf("a consistent run is reported: %+v (linearizable %s)", res.Violations, res.Linearizable)
	}
	if res.Checked.AckedWrites != 2 || res.Checked.Nodes != 3 || res.Checked.Calls != 1 {
		t.Fatalf("checked %+v", res.Checked)
	}
}

func TestCheckReportsASingleAttemptToolRunTwice(t *testing.T) {
	in := cleanInput()
	in.Ledger = append(in.Ledger, in.Ledger[0])
	got := kinds(Check(in).Violations)
	if !slices.Contains(got, VSingleAttempt) || !slices.Contains(got, VDoubleExec) {
		t.Fatalf("violations %v, want %s and %s", got, VSingleAttempt, VDoubleExec)
	}
}

func TestCheckReportsAnExecutionOfAnotherWorkersAttempt(t *testing.T) {
	in := cleanInput()
	in.Ledger[0].Worker = "w2-1"
	if got := kinds(Check(in).Violations); !slices.Equal(got, []string{VUnclaimedExec}) {
		t.Fatalf("violations %v, want only %s", got, VUnclaimedExec)
	}
}

// A task handed by a deposed leader under an older epoch, whose attempt
// was committed by the next leader under its own, must never have run.
func TestCheckReportsAnExecutionUnderAnotherEpoch(t *testing.T) {
	in := cleanInput()
	in.Ledger[0].Epoch = 2
	res := Check(in)
	if got := kinds(res.Violations); !slices.Equal(got, []string{VUnclaimedExec}) {
		t.Fatalf("violations %v, want only %s", got, VUnclaimedExec)
	}
	if d := res.Violations[0].Detail; !strings.Contains(d, "epoch 2") || !strings.Contains(d, "epoch 3") {
		t.Fatalf("detail %q does not name both epochs", d)
	}
}

func TestCheckReportsALostAcknowledgedMessage(t *testing.T) {
	in := cleanInput()
	s := in.Final["s1"].Session
	s.History = slices.Delete(s.History, 1, 2) // k2 is gone
	res := Check(in)
	if !slices.Contains(kinds(res.Violations), VLostWrite) {
		t.Fatalf("violations %v, want %s", kinds(res.Violations), VLostWrite)
	}
}

func TestCheckReportsAMessageNoClientSent(t *testing.T) {
	in := cleanInput()
	s := in.Final["s1"].Session
	s.Inbox = append(s.Inbox, &dexv1.Message{Id: "k-stranger"})
	if got := kinds(Check(in).Violations); !slices.Equal(got, []string{VPhantomWrite}) {
		t.Fatalf("violations %v, want only %s", got, VPhantomWrite)
	}
}

func TestCheckReportsATimerFiredTwice(t *testing.T) {
	in := cleanInput()
	s := in.Final["s1"].Session
	s.History = append(s.History,
		&dexv1.HistoryEntry{Seq: 5, Kind: dexv1.HistoryKind_HISTORY_KIND_TOOL_RESULT, CallId: "call-4-1", Tool: "sleep"},
		&dexv1.HistoryEntry{Seq: 6, Kind: dexv1.HistoryKind_HISTORY_KIND_TOOL_RESULT, CallId: "call-4-1", Tool: "sleep"})
	if got := kinds(Check(in).Violations); !slices.Equal(got, []string{VToldTwice}) {
		t.Fatalf("violations %v, want only %s", got, VToldTwice)
	}
}

func TestCheckReportsIdempotentWriteUnderTwoKeysAndTwoPollTasks(t *testing.T) {
	in := cleanInput()
	build := &dexv1.Step{Id: "st-build", SessionId: "s1", Kind: dexv1.StepKind_STEP_KIND_CALL_TOOL, CallId: "call-5-1", Tool: "build", MaxAttempts: 3,
		Attempts: []*dexv1.Attempt{{N: 1, WorkerId: "w1-1", ClaimedAtMs: 5}, {N: 2, WorkerId: "w1-1", ClaimedAtMs: 6}}}
	in.Final["s1"].Steps = append(in.Final["s1"].Steps, build)
	in.Ledger = append(in.Ledger,
		harness.LedgerEntry{Session: "s1", CallID: "call-5-1", Tool: "build", Attempt: 1, Step: "st-build", Kind: "tool", Worker: "w1-1", IdempotencyKey: "dex:s1:call-5-1"},
		harness.LedgerEntry{Session: "s1", CallID: "call-5-1", Tool: "build", Attempt: 2, Step: "st-build", Kind: "tool", Worker: "w1-1", IdempotencyKey: "other"},
		harness.LedgerEntry{Session: "s1", CallID: "call-5-1", Tool: "build.poll", Attempt: 1, Step: "st-build", Kind: "poll", Worker: "w1-1", TaskID: "build-a"},
		harness.LedgerEntry{Session: "s1", CallID: "call-5-1", Tool: "build.poll", Attempt: 2, Step: "st-build", Kind: "poll", Worker: "w1-1", TaskID: "build-b"})
	got := kinds(Check(in).Violations)
	if !slices.Contains(got, VIdempotentKey) || !slices.Contains(got, VPollTask) {
		t.Fatalf("violations %v, want %s and %s", got, VIdempotentKey, VPollTask)
	}
}

func TestCheckReportsAModelRunPastItsAttempts(t *testing.T) {
	in := cleanInput()
	model := &dexv1.Step{Id: "st-model", SessionId: "s1", Kind: dexv1.StepKind_STEP_KIND_RUN_MODEL, MaxAttempts: 3}
	for n := uint32(1); n <= 4; n++ {
		model.Attempts = append(model.Attempts, &dexv1.Attempt{N: n, WorkerId: "w1-1", ClaimedAtMs: 5})
		in.Ledger = append(in.Ledger, harness.LedgerEntry{Session: "s1", Tool: "model", Attempt: n, Step: "st-model", Kind: "model", Worker: "w1-1"})
	}
	in.Final["s1"].Steps = append(in.Final["s1"].Steps, model)
	if got := kinds(Check(in).Violations); !slices.Equal(got, []string{VModelAttempts}) {
		t.Fatalf("violations %v, want only %s", got, VModelAttempts)
	}
}

func TestCheckReportsDivergedNodes(t *testing.T) {
	in := cleanInput()
	in.Digests["n3"] = "bb"
	if got := kinds(Check(in).Violations); !slices.Equal(got, []string{VDiverged}) {
		t.Fatalf("violations %v, want only %s", got, VDiverged)
	}
}

func TestCheckReportsANonLinearizableReadAndKeepsItsPicture(t *testing.T) {
	in := cleanInput()
	in.Out = t.TempDir()
	// The second read, after the first saw k2, misses it: a stale read.
	in.Ops[3].Keys = []string{"k1"}
	res := Check(in)
	if got := kinds(res.Violations); !slices.Equal(got, []string{VNotLinear}) || res.Linearizable != "Illegal" {
		t.Fatalf("violations %v (linearizable %s), want only %s", got, res.Linearizable, VNotLinear)
	}
	if fi, err := os.Stat(filepath.Join(in.Out, "linearizability.html")); err != nil || fi.Size() == 0 {
		t.Fatalf("no visualisation kept: %v", err)
	}
}

func TestLinearizabilityModel(t *testing.T) {
	cases := []struct {
		name string
		ops  []Op
		want string
	}{
		{"a read concurrent with a send may miss it", []Op{
			{Kind: OpCreate, Session: "s", Key: "a", Call: 0, Return: 1, Answer: AnsOK},
			{Client: 0, Kind: OpSend, Session: "s", Key: "b", Call: 2, Return: 10, Answer: AnsOK},
			{Client: 1, Kind: OpRead, Session: "s", Call: 3, Return: 4, Answer: AnsOK, Keys: []string{"a"}},
		}, "Ok"},
		{"a read that sees a message before its send began", []Op{
			{Kind: OpCreate, Session: "s", Key: "a", Call: 0, Return: 1, Answer: AnsOK},
			{Client: 1, Kind: OpRead, Session: "s", Call: 2, Return: 3, Answer: AnsOK, Keys: []string{"a", "b"}},
			{Client: 0, Kind: OpSend, Session: "s", Key: "b", Call: 4, Return: 5, Answer: AnsOK},
		}, "Illegal"},
		{"a refused send changes nothing", []Op{
			{Kind: OpCreate, Session: "s", Key: "a", Call: 0, Return: 1, Answer: AnsOK},
			{Kind: OpSend, Session: "s", Key: "b", Call: 2, Return: 3, Answer: AnsRefused, Code: "InvalidArgument"},
			{Client: 1, Kind: OpRead, Session: "s", Call: 4, Return: 5, Answer: AnsOK, Keys: []string{"a", "b"}},
		}, "Illegal"},
		{"NotFound after an acknowledged create", []Op{
			{Kind: OpCreate, Session: "s", Key: "a", Call: 0, Return: 1, Answer: AnsOK},
			{Client: 1, Kind: OpRead, Session: "s", Call: 2, Return: 3, Answer: AnsRefused, Code: "NotFound"},
		}, "Illegal"},
		{"the history shrinks", []Op{
			{Kind: OpCreate, Session: "s", Key: "a", Call: 0, Return: 1, Answer: AnsOK},
			{Kind: OpRead, Session: "s", Call: 2, Return: 3, Answer: AnsOK, Keys: []string{"a"}, HistoryLen: 5},
			{Kind: OpRead, Session: "s", Call: 4, Return: 5, Answer: AnsOK, Keys: []string{"a"}, HistoryLen: 4},
		}, "Illegal"},
		{"a read behind what a watch saw", []Op{
			{Kind: OpCreate, Session: "s", Key: "a", Call: 0, Return: 1, Answer: AnsOK},
			{Kind: OpWatch, Session: "s", Call: 2, Return: 3, Answer: AnsOK, WatchMax: 20},
			{Kind: OpRead, Session: "s", Call: 4, Return: 5, Answer: AnsOK, Keys: []string{"a"}, EventSeq: 12},
		}, "Illegal"},
		{"an approval acknowledged then seen waiting", []Op{
			{Kind: OpCreate, Session: "s", Key: "a", Call: 0, Return: 1, Answer: AnsOK},
			{Kind: OpResolve, Session: "s", Step: "st1", Call: 2, Return: 3, Answer: AnsOK},
			{Kind: OpRead, Session: "s", Call: 4, Return: 5, Answer: AnsOK, Keys: []string{"a"}},
		}, "Illegal"},
		{"an unanswered create that took effect late", []Op{
			{Kind: OpCreate, Session: "s", Key: "a", Call: 0, Return: 1, Answer: AnsUnknown},
			{Client: 1, Kind: OpRead, Session: "s", Call: 2, Return: 3, Answer: AnsRefused, Code: "NotFound"},
			{Client: 1, Kind: OpRead, Session: "s", Call: 4, Return: 5, Answer: AnsOK, Keys: []string{"a"}},
		}, "Ok"},
	}
	for _, c := range cases {
		res, err := CheckLinearizable(c.ops, 10*time.Second, "")
		if err != nil || res.Result != c.want {
			t.Errorf("%s: %s (%v), want %s", c.name, res.Result, err, c.want)
		}
	}
}

func TestScheduleIsTheSeedsAlone(t *testing.T) {
	a := NewSchedule(7, NodeFaults).First(400)
	b := NewSchedule(7, NodeFaults).First(400)
	c := NewSchedule(8, NodeFaults).First(400)
	if !slices.Equal(a, b) {
		t.Fatal("the same seed drew two schedules")
	}
	if slices.Equal(a, c) {
		t.Fatal("two seeds drew the same schedule")
	}
	seen := map[string]bool{}
	for _, f := range a {
		seen[f.Kind] = true
	}
	if len(seen) != len(NodeFaults) {
		t.Fatalf("400 faults are of %d kinds; want every kind (%d)", len(seen), len(NodeFaults))
	}
}
