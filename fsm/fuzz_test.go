package fsm

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/fsm/store"
)

// FuzzApply drives random command sequences, as leaders and Workers could
// produce them, and checks the invariants after every command:
// no panic and no halt; attempts numbered from 1 without gaps; at most one
// outcome per Step (only outcome_unknown may be reconciled); a single-attempt
// tool started at most once; a rejected command changes nothing.
func FuzzApply(f *testing.F) {
	for _, seed := range [][]byte{
		{0, 2, 3, 4, 2, 3, 4, 2, 3, 4},
		{0, 2, 3, 5, 2, 3, 6, 2, 7, 11},
		{0, 2, 3, 4, 2, 3, 8, 9, 10, 2, 3, 4},
		{0, 1, 2, 6, 2, 6, 2, 6, 11, 12, 2, 3},
		{0, 2, 3, 4, 2, 13, 2, 3, 4, 14, 15},
		{0, 2, 16, 17, 2, 3, 4, 11, 18, 2, 3},
		{0, 2, 3, 4, 2, 18, 10, 10, 10, 18, 2, 3},
		{0, 2, 3, 4, 19, 0, 2, 3, 4, 2, 3, 4, 19, 11, 19, 0, 1},
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 300 {
			ops = ops[:300]
		}
		d := newDriver(t)
		// The twin gets the same log from the first entry on, in batches.
		d.twin = New(Options{})
		d.twinBatch = 1 + len(ops)%9
		var buf bytes.Buffer
		if err := d.f.Snapshot().Persist(&buf); err != nil {
			t.Fatal(err)
		}
		if err := d.twin.Restore(bytes.NewReader(buf.Bytes())); err != nil {
			t.Fatal(err)
		}
		d.batchTwin, d.batchIndex = New(Options{}), d.index
		if err := d.batchTwin.Restore(&buf); err != nil {
			t.Fatal(err)
		}
		fz := &fuzzer{d: d, outcomes: map[string]fsmpb.Outcome{}}
		for i, op := range ops {
			fz.step(op, byte(i))
			fz.check()
		}
		if len(d.halts) > 0 {
			t.Fatalf("the state machine halted: %v", d.halts)
		}
		d.flushTwin()
		if a, b := persist(t, d.f), persist(t, d.twin); !bytes.Equal(a, b) {
			t.Fatal("a state machine fed the same log in batches persists different bytes")
		}
		// The rows and bytes by table are the same on the twin and on a
		// node restored from a snapshot.
		restored := New(Options{})
		if err := restored.Restore(bytes.NewReader(persist(t, d.f))); err != nil {
			t.Fatal(err)
		}
		want := d.f.State().TableSizes()
		for name, other := range map[string]*FSM{"the twin": d.twin, "a restored node": restored} {
			if got := other.State().TableSizes(); !slices.Equal(got, want) {
				t.Fatalf("%s holds %+v by table; the node that applied the log %+v", name, got, want)
			}
		}
		d.flushBatchTwin()
		if a, b := batchedState(t, d.f), batchedState(t, d.batchTwin); !bytes.Equal(a, b) {
			t.Fatal("a state machine fed the same commands in Batch entries holds a different state")
		}
	})
}

type fuzzer struct {
	d        *driver
	sessions int
	msgs     int
	outcomes map[string]fsmpb.Outcome
	stale    []*fsmpb.Command
	imports  int
}

var fuzzTools = []string{"lookup", "save_note", "send_email", "deploy", "build", "ask_user", "sleep", "resume_agent", "nope"}

// apply runs a command; a rejected one must leave the state as it was.
// The leader's prediction of the Steps it leaves ready must change nothing
// and name only Steps the command then leaves queued.
func (z *fuzzer) apply(cmd *fsmpb.Command) *Result {
	before := z.d.stateBytes()
	if cmd.NowMs == 0 {
		cmd.NowMs = z.d.now
	}
	predicted := z.d.f.Predict(cmd)
	if after := z.d.stateBytes(); !bytes.Equal(before, after) {
		z.d.t.Fatalf("predicting %T changed the state", cmd.Body)
	}
	res := z.d.try(cmd)
	if res.Err != nil {
		if after := z.d.stateBytes(); !bytes.Equal(before, after) {
			z.d.t.Fatalf("rejected %T (%v) changed the state", cmd.Body, res.Err)
		}
		if len(predicted) > 0 {
			z.d.t.Fatalf("rejected %T (%v) was predicted to queue %d Steps", cmd.Body, res.Err, len(predicted))
		}
	}
	for _, p := range predicted {
		if st := z.d.f.State().Step(p.Id); st == nil || st.Status != fsmpb.StepStatus_STEP_STATUS_QUEUED || st.Kind != p.Kind || st.ReadyAtMs > cmd.NowMs ||
			len(st.Attempts) != len(p.Attempts) {
			z.d.t.Fatalf("%T was predicted to leave %s ready (%s), but it is %v", cmd.Body, p.Id, p.Kind, st)
		}
	}
	return res
}

func (z *fuzzer) pick(list []*fsmpb.Step, salt byte) *fsmpb.Step {
	if len(list) == 0 {
		return nil
	}
	return list[int(salt)%len(list)]
}

func (z *fuzzer) ref(st *fsmpb.Step) *fsmpb.AttemptRef {
	at := st.Attempts[len(st.Attempts)-1]
	return &fsmpb.AttemptRef{StepId: st.Id, Attempt: at.N, Token: at.Token, Seq: at.LastSeq + 1}
}

func (z *fuzzer) step(op, salt byte) {
	d := z.d
	st := d.f.State()
	queued := st.StepsWithStatus(fsmpb.StepStatus_STEP_STATUS_QUEUED)
	running := st.StepsWithStatus(fsmpb.StepStatus_STEP_STATUS_RUNNING)
	waiting := st.StepsWithStatus(fsmpb.StepStatus_STEP_STATUS_WAITING)
	switch op % 20 {
	case 0: // a new session, sometimes a child of the last one
		z.sessions++
		parent := ""
		if salt%2 == 1 && z.sessions > 1 {
			parent = fmt.Sprintf("s%d", z.sessions-1)
		}
		z.apply(&fsmpb.Command{Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{
			SessionId: fmt.Sprintf("s%d", z.sessions), ParentId: parent, CompactionThreshold: uint64(salt%3) * 40,
		}}})
	case 1, 2: // a message to some session
		if z.sessions == 0 {
			return
		}
		z.msgs++
		z.apply(&fsmpb.Command{Body: &fsmpb.Command_SendMessage{SendMessage: &fsmpb.SendMessage{
			SessionId: fmt.Sprintf("s%d", int(salt)%z.sessions+1), MessageId: fmt.Sprintf("m%d", z.msgs), Text: "do the thing",
		}}})
	case 3: // hand a queued Step to a Worker
		if q := z.pick(queued, salt); q != nil {
			if d.now < q.ReadyAtMs {
				d.now = q.ReadyAtMs
			}
			z.apply(&fsmpb.Command{Body: &fsmpb.Command_StartAttempt{StartAttempt: &fsmpb.StartAttempt{
				StepId: q.Id, Attempt: uint32(len(q.Attempts)) + 1, WorkerId: "w1", Epoch: d.epoch,
				DefaultRunTimeoutMs: uint32(salt%3) * 60_000,
			}}})
		}
	case 4: // complete a running attempt with a plausible result
		if r := z.pick(running, salt); r != nil {
			z.apply(z.report(r, z.result(r, salt), salt))
		}
	case 5: // claim
		if r := z.pick(running, salt); r != nil {
			z.apply(&fsmpb.Command{Body: &fsmpb.Command_ClaimAttempt{ClaimAttempt: &fsmpb.ClaimAttempt{Ref: z.ref(r)}}})
		}
	case 6: // fail with some error type
		if r := z.pick(running, salt); r != nil {
			z.apply(z.report(r, &fsmpb.AttemptResult{Outcome: &fsmpb.AttemptResult_Failure{Failure: &fsmpb.AttemptFailure{
				ErrorType: fsmpb.ErrorType(int(salt) % 9), Error: "boom",
			}}}, salt))
		}
	case 7: // the Worker died, or its attempt ran past its run deadline
		if r := z.pick(running, salt); r != nil {
			cmd := &fsmpb.Command{Body: &fsmpb.Command_ExpireAttempt{ExpireAttempt: &fsmpb.ExpireAttempt{StepId: r.Id, Attempt: uint32(len(r.Attempts)), Epoch: d.epoch}}}
			if salt%3 == 0 {
				cmd = &fsmpb.Command{Body: &fsmpb.Command_TimeoutAttempt{TimeoutAttempt: &fsmpb.TimeoutAttempt{StepId: r.Id, Attempt: uint32(len(r.Attempts)), Epoch: d.epoch}}}
			}
			z.stale = append(z.stale, cmd)
			z.apply(cmd)
		}
	case 8, 9: // approve, deny, answer, fire
		if w := z.pick(waiting, salt); w != nil {
			var cmd *fsmpb.Command
			switch w.Kind {
			case kApproval:
				cmd = approve(w.Id, salt%2 == 0)
			case kQuestion:
				cmd = answerCmd(w.Id, "yes")
			default:
				d.advance(time.Duration(salt) * time.Second)
				cmd = d.fire(w.Id)
			}
			z.stale = append(z.stale, cmd)
			z.apply(cmd)
		}
	case 10:
		d.advance(time.Duration(salt) * time.Minute)
	case 11, 12: // a full restart or a takeover
		d.restart()
	case 13: // an operator's resume of some session
		if z.sessions > 0 {
			z.apply(resumeWith(fmt.Sprintf("s%d", int(salt)%z.sessions+1), fsmpb.ResumeChoice(salt%3)))
		}
	case 14: // a stale command repeated
		if len(z.stale) > 0 {
			z.apply(z.stale[int(salt)%len(z.stale)])
		}
	case 15: // reconcile whatever step
		all := append(append([]*fsmpb.Step{}, queued...), running...)
		if s := z.pick(all, salt); s != nil {
			z.apply(&fsmpb.Command{Body: &fsmpb.Command_ReconcileOutcome{ReconcileOutcome: &fsmpb.ReconcileOutcome{StepId: s.Id, Outcome: oSucceeded}}})
		}
		for _, s := range d.f.State().Sessions() {
			for _, x := range d.f.State().Steps(s.Id) {
				if x.Outcome == oUnknown && salt%2 == 0 {
					z.apply(&fsmpb.Command{Body: &fsmpb.Command_ReconcileOutcome{ReconcileOutcome: &fsmpb.ReconcileOutcome{StepId: x.Id, Outcome: oFailed}}})
					z.outcomes[x.Id] = oFailed
					return
				}
			}
		}
	case 16: // resume errored sessions that came due
		for _, s := range st.Sessions() {
			if s.ResumeAtMs > 0 {
				if salt%2 == 0 {
					d.now = max(d.now, s.ResumeAtMs)
				}
				z.apply(&fsmpb.Command{Body: &fsmpb.Command_ResumeErrored{ResumeErrored: &fsmpb.ResumeErrored{SessionId: s.Id, Epoch: d.epoch}}})
			}
		}
	case 17: // a command from a deposed leader
		z.apply(&fsmpb.Command{Body: &fsmpb.Command_RestartSessions{RestartSessions: &fsmpb.RestartSessions{Epoch: d.epoch - 1}}})
	case 18: // an operator's history edit, or now and then a cancel, a close, the retention of closed sessions or a fold
		if salt%16 == 15 {
			keep := uint64(salt/16) % 3
			z.apply(&fsmpb.Command{Body: &fsmpb.Command_SetTurnFolding{SetTurnFolding: &fsmpb.SetTurnFolding{Epoch: d.epoch, KeepTurnSteps: keep}}})
			if ids := z.d.f.State().FoldDue(MaxFoldSessions); len(ids) > 0 {
				z.apply(&fsmpb.Command{Body: &fsmpb.Command_FoldTurns{FoldTurns: &fsmpb.FoldTurns{Epoch: d.epoch, SessionIds: ids, MaxSteps: uint32(salt%5) + 1}}})
			}
		} else if z.sessions > 0 && salt%8 == 5 {
			z.apply(&fsmpb.Command{Body: &fsmpb.Command_CloseSession{CloseSession: &fsmpb.CloseSession{SessionId: fmt.Sprintf("s%d", int(salt)%z.sessions+1), RetentionMs: int64(salt%3) * 60_000}}})
		} else if z.sessions > 0 && salt%8 == 1 {
			if ids := st.ClosedDue(z.d.now, MaxExpireSessions); len(ids) > 0 {
				z.apply(&fsmpb.Command{Body: &fsmpb.Command_ExpireClosedSessions{ExpireClosedSessions: &fsmpb.ExpireClosedSessions{Epoch: d.epoch, SessionIds: ids}}})
			}
		} else if z.sessions > 0 && salt%4 == 3 {
			z.apply(&fsmpb.Command{Body: &fsmpb.Command_CancelTurn{CancelTurn: &fsmpb.CancelTurn{SessionId: fmt.Sprintf("s%d", int(salt)%z.sessions+1)}}})
		} else if z.sessions > 0 {
			z.apply(&fsmpb.Command{Body: &fsmpb.Command_EditHistory{EditHistory: &fsmpb.EditHistory{SessionId: fmt.Sprintf("s%d", int(salt)%z.sessions+1), Note: "edited"}}})
		}
	case 19: // an import of a copy of some session, whole or cut short (a restart discards it)
		if z.sessions == 0 {
			return
		}
		from := st.Session(fmt.Sprintf("s%d", int(salt)%z.sessions+1))
		if from == nil || from.Turn != nil {
			return // a copy's kept turn would name the original's Steps
		}
		z.imports++
		plan := planImport(st, from.Id, fmt.Sprintf("i%d", z.imports), d.epoch, 1+int(salt)%5)
		cmds := plan.all()
		if salt%4 == 0 {
			cmds = cmds[:1+int(salt/4)%len(cmds)]
		}
		for _, cmd := range cmds {
			z.apply(cmd)
		}
	}
}

// report ends an attempt with a ReportAttempt, or now and then with the
// CompleteAttempt or FailAttempt an older log holds.
func (z *fuzzer) report(r *fsmpb.Step, res *fsmpb.AttemptResult, salt byte) *fsmpb.Command {
	ref := z.ref(r)
	if salt%4 != 1 {
		return &fsmpb.Command{Body: &fsmpb.Command_ReportAttempt{ReportAttempt: &fsmpb.ReportAttempt{Ref: ref, Result: res}}}
	}
	return legacyCommand(ref, res)
}

func (z *fuzzer) result(r *fsmpb.Step, salt byte) *fsmpb.AttemptResult {
	c := &fsmpb.AttemptResult{}
	switch r.Kind {
	case kRunModel:
		out := &fsmpb.ModelOutput{Text: "ok"}
		for i := 0; i < int(salt%4); i++ {
			z.msgs++
			out.ToolCalls = append(out.ToolCalls, &fsmpb.ToolCall{
				CallId: fmt.Sprintf("c%d", z.msgs), Tool: fuzzTools[(int(salt)+i)%len(fuzzTools)],
				Arguments: fmt.Sprintf(`{"seconds": 1, "question": "?", "agent": "s%d", "choice": %q}`, int(salt)%max(z.sessions, 1)+1, []string{"retry", "drop", ""}[salt%3]),
			})
		}
		c.Outcome = &fsmpb.AttemptResult_ModelOutput{ModelOutput: out}
	case kCompact:
		c.Outcome = &fsmpb.AttemptResult_Summary{Summary: "summary"}
	case kPoll:
		c.Outcome = &fsmpb.AttemptResult_PollResult{PollResult: &fsmpb.PollResult{Done: salt%3 == 0, Result: &fsmpb.ToolResult{Content: "done"}}}
	default:
		c.Outcome = &fsmpb.AttemptResult_ToolResult{ToolResult: &fsmpb.ToolResult{Content: "ok", IsError: salt%5 == 0, TaskId: fmt.Sprintf("task-%d", salt)}}
	}
	return c
}

func (z *fuzzer) check() {
	t := z.d.t
	st := z.d.f.State()
	checkTableSizes(t, st)
	for _, s := range st.Sessions() {
		checkRunningFigures(t, st, s)
		checkFolded(t, st, s)
		singles := map[string]int{}
		for _, x := range st.Steps(s.Id) {
			for i, at := range x.Attempts {
				if at.N != uint32(i+1) {
					t.Fatalf("step %s: attempt %d numbered %d", x.Id, i+1, at.N)
				}
				if at.Status == fsmpb.AttemptStatus_ATTEMPT_STATUS_RUNNING && (i != len(x.Attempts)-1 || x.Status != fsmpb.StepStatus_STEP_STATUS_RUNNING) {
					t.Fatalf("step %s (%s): attempt %d running but not current", x.Id, x.Status, at.N)
				}
			}
			if x.Status == fsmpb.StepStatus_STEP_STATUS_RUNNING && x.Attempts[len(x.Attempts)-1].Status != fsmpb.AttemptStatus_ATTEMPT_STATUS_RUNNING {
				t.Fatalf("step %s running with no running attempt", x.Id)
			}
			if x.MaxAttempts > 0 && len(x.Attempts) > int(x.MaxAttempts) {
				t.Fatalf("step %s has %d attempts; at most %d", x.Id, len(x.Attempts), x.MaxAttempts)
			}
			if x.Kind == kSingle {
				singles[x.CallId]++
				if len(x.Attempts) > 1 || singles[x.CallId] > 1 {
					t.Fatalf("single-attempt call %s started more than once", x.CallId)
				}
			}
			if x.Status == fsmpb.StepStatus_STEP_STATUS_DONE {
				prev, seen := z.outcomes[x.Id]
				switch {
				case !seen:
					z.outcomes[x.Id] = x.Outcome
				case prev != x.Outcome && !(prev == oUnknown):
					t.Fatalf("step %s changed its outcome from %s to %s", x.Id, OutcomeName(prev), OutcomeName(x.Outcome))
				default:
					z.outcomes[x.Id] = x.Outcome
				}
				if x.Outcome == fsmpb.Outcome_OUTCOME_UNSPECIFIED {
					t.Fatalf("step %s done without an outcome", x.Id)
				}
			}
		}
	}
}

// checkTableSizes: the rows and bytes kept per table as commands apply
// are those a walk of every row counts.
func checkTableSizes(t testing.TB, st *State) {
	t.Helper()
	kept, walked := st.TableSizes(), st.tx.RecountSizes()
	for i := range kept {
		if kept[i] != walked[i] {
			t.Fatalf("table %s: kept %d rows, %d bytes; a walk counts %d rows, %d bytes",
				kept[i].Table, kept[i].Rows, kept[i].Bytes, walked[i].Rows, walked[i].Bytes)
		}
	}
}

// checkRunningFigures: the figures a session header keeps agree with its rows.
func checkRunningFigures(t testing.TB, st *State, s *fsmpb.Session) {
	t.Helper()
	history, _ := st.History(s.Id, 0, math.MaxInt, math.MaxInt)
	var size uint64
	for _, e := range history {
		size += store.EntrySize(e)
		if e.CumSize != size {
			t.Fatalf("session %s: entry %d has cum_size %d; want %d", s.Id, e.Seq, e.CumSize, size)
		}
	}
	if size != s.HistorySize || uint64(len(history)) != s.HistoryCount {
		t.Fatalf("session %s keeps history size %d and count %d; its rows add up to %d and %d", s.Id, s.HistorySize, s.HistoryCount, size, len(history))
	}
	if n := len(st.Inbox(s.Id, math.MaxInt)); n != int(s.InboxCount) {
		t.Fatalf("session %s keeps inbox count %d; it has %d messages", s.Id, s.InboxCount, n)
	}
}

// checkFolded: every Step of a session is kept or folded, none of a turn
// the session counts folded is kept, and the folded rows add up to the
// session's counters.
func checkFolded(t testing.TB, st *State, s *fsmpb.Session) {
	t.Helper()
	steps := st.Steps(s.Id)
	if uint64(len(steps))+s.FoldedSteps != s.NextStep-1 {
		t.Fatalf("session %s: %d Steps kept and %d folded; it queued %d", s.Id, len(steps), s.FoldedSteps, s.NextStep-1)
	}
	for _, x := range steps {
		if x.Turn <= s.FoldedThroughTurn {
			t.Fatalf("session %s folded through turn %d but keeps Step %s of turn %d", s.Id, s.FoldedThroughTurn, x.Id, x.Turn)
		}
	}
	folded, _ := st.FoldedTurns(s.Id, 0, 1<<30)
	n := uint64(0)
	for _, f := range folded {
		n += uint64(f.Steps)
	}
	if n != s.FoldedSteps || (len(folded) > 0 && folded[len(folded)-1].Turn > s.FoldedThroughTurn+1) {
		t.Fatalf("session %s: %d folded rows of %d Steps; it counts %d Steps folded through turn %d", s.Id, len(folded), n, s.FoldedSteps, s.FoldedThroughTurn)
	}
	if want := foldDueThrough(s, st.KeepTurnSteps()); s.FoldDueThrough != want && s.FoldDueThrough != 0 {
		t.Fatalf("session %s: owed a fold through turn %d; the setting owes %d", s.Id, s.FoldDueThrough, want)
	}
}
