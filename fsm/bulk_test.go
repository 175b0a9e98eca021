package fsm

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dexhq/dex/fsm/fsmpb"
)

func startBulkCmd(j *fsmpb.BulkJob) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_StartBulkJob{StartBulkJob: &fsmpb.StartBulkJob{Job: j}}}
}

func bulkStepCmd(st *fsmpb.BulkJobStep) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_BulkJobStep{BulkJobStep: st}}
}

func cancelBulkCmd(id string) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_CancelBulkJob{CancelBulkJob: &fsmpb.CancelBulkJob{JobId: id, By: "ops"}}}
}

func labelFilter(kv ...string) *fsmpb.BulkFilter { return &fsmpb.BulkFilter{Labels: lbl(kv...)} }

// createWith creates session id with labels and, when msg is given, a
// first message (so a turn runs: the driver's Workers take nothing by
// themselves).
func (d *driver) createWith(id, msg string, labels ...string) {
	d.t.Helper()
	c := &fsmpb.CreateSession{SessionId: id, Labels: lbl(labels...)}
	if msg != "" {
		c.MessageId, c.Message = id+"-m0", msg
	}
	d.do(&fsmpb.Command{Body: &fsmpb.Command_CreateSession{CreateSession: c}})
}

// runBulk drives a job as the leader does, each step proposed twice (the
// second as after a takeover): the second must be refused and change
// nothing. It returns the steps applied.
func (d *driver) runBulk(id string) int {
	d.t.Helper()
	n := 0
	for {
		st := d.f.State().NextBulkStep(id, d.epoch)
		if st == nil {
			return n
		}
		d.advance(time.Millisecond)
		d.do(bulkStepCmd(st))
		n++
		d.refused(bulkStepCmd(st), CodeFailedPrecondition)
		if n > 1000 {
			d.t.Fatal("the job does not end")
		}
	}
}

func (d *driver) bulkJob(id string) *fsmpb.BulkJob {
	d.t.Helper()
	j := d.f.State().BulkJob(id)
	if j == nil {
		d.t.Fatalf("bulk job %s not found", id)
	}
	return j
}

func skipped(j *fsmpb.BulkJob, reason string) uint64 {
	for _, s := range j.Skipped {
		if s.Reason == reason {
			return s.Count
		}
	}
	return 0
}

// notes counts the history notes of a session that hold text.
func (d *driver) notes(id, text string) int {
	n := 0
	entries, _ := d.f.State().History(id, 0, 1000, 1<<20)
	for _, e := range entries {
		if e.Kind == fsmpb.HistoryKind_HISTORY_KIND_NOTE && strings.Contains(e.Text, text) {
			n++
		}
	}
	return n
}

// A bulk cancel, every step proposed twice, cancels each matching running
// session's turn once, skips the idle ones, leaves the others alone, and
// applies the same on a twin fed the log in batches.
func TestBulk_CancelActsOnEachMatchOnce(t *testing.T) {
	d := newDriver(t)
	d.twin, d.twinBatch = New(Options{}), 7
	var buf bytes.Buffer
	if err := d.f.Snapshot().Persist(&buf); err != nil {
		t.Fatal(err)
	}
	if err := d.twin.Restore(&buf); err != nil {
		t.Fatal(err)
	}
	const running, idle = 250, 30
	for i := range running {
		d.createWith(fmt.Sprintf("r%03d", i), "hello", "team", "a")
		if i%50 == 0 {
			d.advance(time.Millisecond) // several sessions share a created time, others do not
		}
	}
	for i := range idle {
		d.createWith(fmt.Sprintf("i%03d", i), "", "team", "a")
	}
	for i := range 5 {
		d.createWith(fmt.Sprintf("other%d", i), "hello", "team", "b")
	}
	d.do(startBulkCmd(&fsmpb.BulkJob{Id: "j1", Action: fsmpb.BulkAction_BULK_ACTION_CANCEL, Filter: labelFilter("team", "a"), Reason: "outage", By: "ops"}))
	steps := d.runBulk("j1")
	j := d.bulkJob("j1")
	if j.Status != fsmpb.BulkJobStatus_BULK_JOB_STATUS_DONE || j.Acted != running || skipped(j, SkipNoTurn) != idle || j.Failed != 0 {
		t.Fatalf("job: %v", j)
	}
	if want := (running+idle+MaxBulkStep-1)/MaxBulkStep + 0; steps < want {
		t.Fatalf("%d steps for %d sessions; want at least %d", steps, running+idle, want)
	}
	for i := range running {
		id := fmt.Sprintf("r%03d", i)
		wantStatus(t, d.session(id), sIdle)
		if n := d.notes(id, "cancelled by ops: outage"); n != 1 {
			t.Fatalf("session %s has %d cancel notes; want 1", id, n)
		}
	}
	for i := range 5 {
		if s := d.session(fmt.Sprintf("other%d", i)); s.Turn == nil {
			t.Fatalf("session %s outside the filter was cancelled", s.Id)
		}
	}
	d.flushTwin()
	if a, b := persist(t, d.f), persist(t, d.twin); !bytes.Equal(a, b) {
		t.Fatal("the twin fed the same log in batches ended in another state")
	}
}

// Sessions created after the job started are not part of it, even when
// they match.
func TestBulk_LeavesSessionsCreatedAfterTheJob(t *testing.T) {
	d := newDriver(t)
	d.createWith("old", "hello", "team", "a")
	d.advance(time.Second)
	d.do(startBulkCmd(&fsmpb.BulkJob{Id: "j", Action: fsmpb.BulkAction_BULK_ACTION_CANCEL, Filter: labelFilter("team", "a")}))
	d.advance(time.Second)
	d.createWith("new", "hello", "team", "a")
	d.runBulk("j")
	if d.session("old").Turn != nil || d.session("new").Turn == nil {
		t.Fatalf("old: %v, new: %v; want the old cancelled and the new running", d.session("old").Status, d.session("new").Status)
	}
	if j := d.bulkJob("j"); j.Acted != 1 {
		t.Fatalf("acted on %d sessions; want 1", j.Acted)
	}
}

// A cancelled job takes no further step; its sessions acted on stay so.
func TestBulk_CancelledJobStops(t *testing.T) {
	d := newDriver(t)
	for i := range 150 {
		d.createWith(fmt.Sprintf("s%03d", i), "hello", "k", "v")
	}
	d.do(startBulkCmd(&fsmpb.BulkJob{Id: "j", Action: fsmpb.BulkAction_BULK_ACTION_CANCEL, Filter: labelFilter("k", "v")}))
	first := d.f.State().NextBulkStep("j", d.epoch)
	d.do(bulkStepCmd(first))
	second := d.f.State().NextBulkStep("j", d.epoch)
	d.do(cancelBulkCmd("j"))
	d.do(cancelBulkCmd("j")) // an ended job is left as it is
	d.refused(bulkStepCmd(second), CodeFailedPrecondition)
	if st := d.f.State().NextBulkStep("j", d.epoch); st != nil {
		t.Fatalf("a cancelled job has a next step: %v", st)
	}
	j := d.bulkJob("j")
	if j.Status != fsmpb.BulkJobStatus_BULK_JOB_STATUS_CANCELLED || j.Acted != MaxBulkStep || j.CancelledBy != "ops" || j.EndedAtMs == 0 {
		t.Fatalf("job: %v", j)
	}
	if len(d.f.State().RunningBulkJobs()) != 0 {
		t.Fatal("a cancelled job is listed as running")
	}
	d.refused(cancelBulkCmd("nope"), CodeNotFound)
}

// errored drives a session's model Step to fail until the session errors.
func (d *driver) errored(id string) {
	d.t.Helper()
	d.createSession(id, "", "hello")
	for range 5 {
		if d.session(id).Status == sErrored {
			return
		}
		d.advance(time.Minute)
		d.startNext(id, kRunModel).fail(fsmpb.ErrorType_ERROR_TYPE_OVERLOADED, "busy")
	}
	wantStatus(t0(d), d.session(id), sErrored)
}

func t0(d *driver) *testing.T { return d.t.(*testing.T) }

// Each action acts where it applies and counts the others as skipped.
func TestBulk_EachAction(t *testing.T) {
	t.Run("resume", func(t *testing.T) {
		d := newDriver(t)
		d.errored("e")
		d.do(&fsmpb.Command{Body: &fsmpb.Command_SetLabels{SetLabels: &fsmpb.SetLabels{SessionId: "e", Set: lbl("k", "v")}}})
		d.createWith("idle", "", "k", "v")
		d.do(startBulkCmd(&fsmpb.BulkJob{Id: "j", Action: fsmpb.BulkAction_BULK_ACTION_RESUME, Filter: labelFilter("k", "v")}))
		d.runBulk("j")
		if s := d.session("e"); s.Status == sErrored {
			t.Fatal("the errored session was not resumed")
		}
		if j := d.bulkJob("j"); j.Acted != 1 || skipped(j, SkipNotPaused) != 1 {
			t.Fatalf("job: %v", j)
		}
	})
	t.Run("close", func(t *testing.T) {
		d := newDriver(t)
		d.createWith("idle", "", "k", "v")
		d.createWith("busy", "hi", "k", "v")
		d.do(startBulkCmd(&fsmpb.BulkJob{Id: "j", Action: fsmpb.BulkAction_BULK_ACTION_CLOSE, Filter: labelFilter("k", "v")}))
		st := d.f.State().NextBulkStep("j", d.epoch)
		st.RetentionMs = []int64{3600_000, 3600_000}
		d.do(bulkStepCmd(st))
		if s := d.session("idle"); s.Status != fsmpb.SessionStatus_SESSION_STATUS_CLOSED || s.DeleteAtMs != d.now+3600_000 {
			t.Fatalf("idle session: %v, delete at %d", s.Status, s.DeleteAtMs)
		}
		if s := d.session("busy"); s.CloseRequestedAtMs == 0 || s.Turn == nil {
			t.Fatal("the busy session is not closing with its turn kept")
		}
		// A second job skips them: both were asked to close.
		d.do(startBulkCmd(&fsmpb.BulkJob{Id: "j2", Action: fsmpb.BulkAction_BULK_ACTION_CLOSE, Filter: labelFilter("k", "v")}))
		d.runBulk("j2")
		if j := d.bulkJob("j2"); j.Acted != 0 || skipped(j, SkipClosing) != 2 {
			t.Fatalf("job: %v", j)
		}
	})
	t.Run("delete", func(t *testing.T) {
		d := newDriver(t)
		d.createWith("idle", "", "k", "v")
		d.createWith("busy", "hi", "k", "v")
		d.createWith("keep", "", "k", "w")
		d.do(startBulkCmd(&fsmpb.BulkJob{Id: "j", Action: fsmpb.BulkAction_BULK_ACTION_DELETE, Filter: labelFilter("k", "v")}))
		d.runBulk("j")
		if d.f.State().Session("idle") != nil || d.f.State().Session("busy") == nil || d.f.State().Session("keep") == nil {
			t.Fatal("want idle deleted, busy and keep kept")
		}
		if j := d.bulkJob("j"); j.Acted != 1 || skipped(j, SkipInTurn) != 1 {
			t.Fatalf("job: %v", j)
		}
	})
	t.Run("label", func(t *testing.T) {
		d := newDriver(t)
		d.createWith("a", "", "k", "v")
		d.createWith("b", "", "k", "v", "x", "1")
		for i := range MaxLabels - 1 {
			d.do(&fsmpb.Command{Body: &fsmpb.Command_SetLabels{SetLabels: &fsmpb.SetLabels{SessionId: "a", Set: lbl(fmt.Sprintf("f%02d", i), "v")}}})
		}
		d.createWith("c", "")
		d.do(startBulkCmd(&fsmpb.BulkJob{Id: "j", Action: fsmpb.BulkAction_BULK_ACTION_LABEL, Filter: labelFilter("k", "v"), Labels: lbl("x", "1")}))
		d.runBulk("j")
		// a is full (32 labels): failed; b has the label: skipped.
		if j := d.bulkJob("j"); j.Acted != 0 || skipped(j, SkipHasLabels) != 1 || j.Failed != 1 {
			t.Fatalf("job: %v", j)
		}
		d.do(startBulkCmd(&fsmpb.BulkJob{Id: "j2", Action: fsmpb.BulkAction_BULK_ACTION_LABEL, Labels: lbl("y", "2")}))
		d.runBulk("j2")
		if got := labelText(d.session("c")); got != "y=2" {
			t.Fatalf("labels of c: %q", got)
		}
		if j := d.bulkJob("j2"); j.Acted != 2 || j.Failed != 1 {
			t.Fatalf("job: %v", j)
		}
	})
	t.Run("a filter that matches nothing", func(t *testing.T) {
		d := newDriver(t)
		d.createWith("a", "hi", "k", "v")
		d.do(startBulkCmd(&fsmpb.BulkJob{Id: "j", Action: fsmpb.BulkAction_BULK_ACTION_CANCEL, Filter: labelFilter("k", "none")}))
		if n := d.runBulk("j"); n != 1 {
			t.Fatalf("%d steps; want 1", n)
		}
		if j := d.bulkJob("j"); j.Status != fsmpb.BulkJobStatus_BULK_JOB_STATUS_DONE || j.Acted != 0 {
			t.Fatalf("job: %v", j)
		}
	})
}

// A session that stopped matching between the leader's read and the step
// is skipped; one outside the step's cursors refuses the step.
func TestBulk_StepChecksItsSessions(t *testing.T) {
	d := newDriver(t)
	d.createWith("a", "hi", "k", "v")
	d.advance(time.Millisecond)
	d.createWith("b", "hi", "k", "v")
	d.advance(time.Millisecond)
	d.createWith("c", "", "k", "v")
	d.do(startBulkCmd(&fsmpb.BulkJob{Id: "j", Action: fsmpb.BulkAction_BULK_ACTION_CANCEL, Filter: labelFilter("k", "v")}))
	st := d.f.State().NextBulkStep("j", d.epoch)
	bad := clone(st)
	bad.ToCursor = &fsmpb.BulkCursor{AtMs: d.session("a").CreatedAtMs, Id: "a"}
	bad.Last = false
	d.refused(bulkStepCmd(bad), CodeInvalid)
	d.do(&fsmpb.Command{Body: &fsmpb.Command_SetLabels{SetLabels: &fsmpb.SetLabels{SessionId: "b", Remove: []string{"k"}}}})
	d.do(&fsmpb.Command{Body: &fsmpb.Command_DeleteSession{DeleteSession: &fsmpb.DeleteSession{SessionId: "c"}}})
	d.do(bulkStepCmd(st))
	j := d.bulkJob("j")
	if j.Acted != 1 || skipped(j, SkipNoMatch) != 1 || skipped(j, SkipNotFound) != 1 {
		t.Fatalf("job: %v", j)
	}
	if d.session("b").Turn == nil {
		t.Fatal("a session that left the filter was cancelled")
	}
	stale := clone(st)
	stale.Epoch = d.epoch - 1
	d.refused(bulkStepCmd(stale), CodeFailedPrecondition)
}

// Bad input is refused and changes nothing.
func TestBulk_BadJobsAreRefused(t *testing.T) {
	d := newDriver(t)
	d.do(startBulkCmd(&fsmpb.BulkJob{Id: "dup", Action: fsmpb.BulkAction_BULK_ACTION_CLOSE}))
	for name, j := range map[string]*fsmpb.BulkJob{
		"no id":                {Action: fsmpb.BulkAction_BULK_ACTION_CANCEL},
		"no action":            {Id: "j"},
		"unknown action":       {Id: "j", Action: 99},
		"label without labels": {Id: "j", Action: fsmpb.BulkAction_BULK_ACTION_LABEL},
		"bad label":            {Id: "j", Action: fsmpb.BulkAction_BULK_ACTION_LABEL, Labels: lbl("Bad", "v")},
		"labels on a cancel":   {Id: "j", Action: fsmpb.BulkAction_BULK_ACTION_CANCEL, Labels: lbl("k", "v")},
		"reason on a close":    {Id: "j", Action: fsmpb.BulkAction_BULK_ACTION_CLOSE, Reason: "why"},
		"long reason":          {Id: "j", Action: fsmpb.BulkAction_BULK_ACTION_CANCEL, Reason: strings.Repeat("x", maxCancelReason+1)},
		"deleted status":       {Id: "j", Action: fsmpb.BulkAction_BULK_ACTION_CANCEL, Filter: &fsmpb.BulkFilter{Status: fsmpb.SessionStatus_SESSION_STATUS_DELETED}},
		"bad filter label":     {Id: "j", Action: fsmpb.BulkAction_BULK_ACTION_CANCEL, Filter: labelFilter("", "v")},
		"reversed range":       {Id: "j", Action: fsmpb.BulkAction_BULK_ACTION_CANCEL, Filter: &fsmpb.BulkFilter{CreatedFromMs: 10, CreatedToMs: 5}},
	} {
		t.Run(name, func(t *testing.T) { d.refused(startBulkCmd(j), CodeInvalid) })
	}
	d.refused(startBulkCmd(&fsmpb.BulkJob{Id: "dup", Action: fsmpb.BulkAction_BULK_ACTION_CLOSE}), CodeAlreadyExists)
	d.refused(bulkStepCmd(&fsmpb.BulkJobStep{Epoch: d.epoch, JobId: "nope", Last: true}), CodeNotFound)
	d.refused(bulkStepCmd(&fsmpb.BulkJobStep{Epoch: d.epoch, JobId: "dup", SessionIds: make([]string, MaxBulkStep+1), Last: true}), CodeInvalid)
}

// The table stays bounded: a full table of running jobs refuses a new one,
// an ended job makes room, and ended jobs go after their retention.
func TestBulk_JobsAreBounded(t *testing.T) {
	d := newDriver(t)
	for i := range MaxBulkJobs {
		d.do(startBulkCmd(&fsmpb.BulkJob{Id: fmt.Sprintf("j%03d", i), Action: fsmpb.BulkAction_BULK_ACTION_CLOSE}))
	}
	d.refused(startBulkCmd(&fsmpb.BulkJob{Id: "more", Action: fsmpb.BulkAction_BULK_ACTION_CLOSE}), CodeFailedPrecondition)
	d.do(cancelBulkCmd("j007"))
	d.advance(time.Second)
	d.do(cancelBulkCmd("j003"))
	d.do(startBulkCmd(&fsmpb.BulkJob{Id: "more", Action: fsmpb.BulkAction_BULK_ACTION_CLOSE}))
	if d.f.State().BulkJob("j007") != nil || d.f.State().BulkJob("j003") == nil {
		t.Fatal("want the job that ended first dropped to make room, the other kept")
	}
	if n := len(d.f.State().BulkJobs()); n != MaxBulkJobs {
		t.Fatalf("%d jobs kept; want %d", n, MaxBulkJobs)
	}
	d.advance(BulkRetentionMs * time.Millisecond)
	d.do(cancelBulkCmd("j001"))
	d.do(startBulkCmd(&fsmpb.BulkJob{Id: "later", Action: fsmpb.BulkAction_BULK_ACTION_CLOSE}))
	if d.f.State().BulkJob("j003") != nil || d.f.State().BulkJob("j001") == nil {
		t.Fatal("want the job ended a retention ago dropped, the one just ended kept")
	}
	if jobs := d.f.State().BulkJobs(); jobs[0].Id != "later" {
		t.Fatalf("newest job listed first: %s", jobs[0].Id)
	}
}

// A job survives a snapshot and restore, and a new leader goes on from its
// cursor; a step of the old epoch is refused.
func TestBulk_GoesOnAfterRestore(t *testing.T) {
	d := newDriver(t)
	for i := range 230 {
		d.createWith(fmt.Sprintf("s%03d", i), "hello", "k", "v")
	}
	d.do(startBulkCmd(&fsmpb.BulkJob{Id: "j", Action: fsmpb.BulkAction_BULK_ACTION_CANCEL, Filter: labelFilter("k", "v")}))
	d.do(bulkStepCmd(d.f.State().NextBulkStep("j", d.epoch)))
	old := d.f.State().NextBulkStep("j", d.epoch)
	d.restart()
	d.refused(bulkStepCmd(old), CodeFailedPrecondition)
	if j := d.bulkJob("j"); j.Acted != MaxBulkStep || j.Status != fsmpb.BulkJobStatus_BULK_JOB_STATUS_RUNNING {
		t.Fatalf("job after restore: %v", j)
	}
	d.runBulk("j")
	if j := d.bulkJob("j"); j.Acted != 230 || j.Status != fsmpb.BulkJobStatus_BULK_JOB_STATUS_DONE {
		t.Fatalf("job: %v", j)
	}
	for i := range 230 {
		if n := d.notes(fmt.Sprintf("s%03d", i), "cancelled by"); n != 1 {
			t.Fatalf("session s%03d has %d cancel notes", i, n)
		}
	}
}
