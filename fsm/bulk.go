package fsm

import (
	"cmp"
	"slices"
	"strings"

	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/fsm/store"
)

// Bulk jobs (docs/bulk.md): one action on every session of the partition
// that a filter matches and that was created up to the job's creation.
// StartBulkJob writes the job; the leader reads the next page of matching
// sessions from the list index in created order after the job's cursor and
// proposes a BulkJobStep for it. A step applies only when its from_cursor
// is the job's cursor, and moves the cursor to its to_cursor, so a step
// proposed twice (a takeover between proposing and hearing the result)
// changes nothing the second time, and no session is acted on twice. Each
// session of a step gets the action in the same command, when the action
// applies to it; otherwise it is counted as skipped, with why.

const (
	// MaxBulkJobs bounds the jobs the state keeps, running or ended: a new
	// job drops the job that ended first when the table is full, and is
	// refused when every kept job is running.
	MaxBulkJobs = 100
	// MaxBulkStep bounds the sessions one BulkJobStep names.
	MaxBulkStep = 100
	// BulkRetentionMs is how long an ended job is kept (7 days): ended jobs
	// older than this are dropped when a job starts.
	BulkRetentionMs = 7 * 24 * 3600 * 1000
	// maxBulkSkipReasons bounds the reasons a job counts skips under.
	maxBulkSkipReasons = 16
)

// Reasons a session of a job is skipped.
const (
	SkipNotFound    = "deleted before its turn came"
	SkipNoMatch     = "no longer matches the filter"
	SkipNoTurn      = "no turn in progress"
	SkipClosed      = "closed"
	SkipNotPaused   = "not paused or errored"
	SkipClosing     = "already closing or closed"
	SkipInTurn      = "in a turn"
	SkipHasLabels   = "already has the labels"
	defaultBulkUser = "a bulk job"
)

// BulkActionName is an action as dexctl names it.
func BulkActionName(a fsmpb.BulkAction) string {
	switch a {
	case fsmpb.BulkAction_BULK_ACTION_CANCEL:
		return "cancel"
	case fsmpb.BulkAction_BULK_ACTION_RESUME:
		return "resume"
	case fsmpb.BulkAction_BULK_ACTION_CLOSE:
		return "close"
	case fsmpb.BulkAction_BULK_ACTION_DELETE:
		return "delete"
	case fsmpb.BulkAction_BULK_ACTION_LABEL:
		return "label"
	}
	return "unknown"
}

// CheckBulkJob refuses a job a client asks for that is malformed: what
// needs no state.
func CheckBulkJob(j *fsmpb.BulkJob) *Rejection {
	if j == nil {
		return reject(CodeInvalid, "a bulk job is required")
	}
	if r := CheckID("job id", j.Id); r != nil {
		return r
	}
	switch j.Action {
	case fsmpb.BulkAction_BULK_ACTION_CANCEL, fsmpb.BulkAction_BULK_ACTION_RESUME, fsmpb.BulkAction_BULK_ACTION_CLOSE,
		fsmpb.BulkAction_BULK_ACTION_DELETE:
		if len(j.Labels) > 0 {
			return reject(CodeInvalid, "labels are given only to a label job, not to a %s", BulkActionName(j.Action))
		}
	case fsmpb.BulkAction_BULK_ACTION_LABEL:
		if len(j.Labels) == 0 {
			return reject(CodeInvalid, "a label job sets at least one label")
		}
		if r := CheckLabels(j.Labels); r != nil {
			return r
		}
	default:
		return reject(CodeInvalid, "action %d is not one of cancel, resume, close, delete, label", j.Action)
	}
	if j.Reason != "" && j.Action != fsmpb.BulkAction_BULK_ACTION_CANCEL {
		return reject(CodeInvalid, "a reason is given only to a cancel")
	}
	if len(j.Reason) > maxCancelReason {
		return reject(CodeInvalid, "reason is longer than %d bytes", maxCancelReason)
	}
	if len(j.By) > maxIDLength {
		return reject(CodeInvalid, "by is longer than %d bytes", maxIDLength)
	}
	return CheckBulkFilter(j.Filter)
}

// CheckBulkFilter refuses a filter ListSessions would refuse.
func CheckBulkFilter(f *fsmpb.BulkFilter) *Rejection {
	if f == nil {
		return nil
	}
	if _, ok := fsmpb.SessionStatus_name[int32(f.Status)]; !ok || f.Status == fsmpb.SessionStatus_SESSION_STATUS_DELETED {
		return reject(CodeInvalid, "status %d is not a status a session is listed in", f.Status)
	}
	if len(f.Agent) > maxIDLength || len(f.ParentId) > maxIDLength || len(f.ForkedFrom) > maxIDLength {
		return reject(CodeInvalid, "an agent or session id of the filter is longer than %d bytes", maxIDLength)
	}
	if r := CheckLabels(f.Labels); r != nil {
		return reject(CodeInvalid, "filter labels: %s", r.Reason)
	}
	for _, r := range []struct {
		name     string
		from, to int64
	}{{"created", f.CreatedFromMs, f.CreatedToMs}, {"updated", f.UpdatedFromMs, f.UpdatedToMs}} {
		if r.from < 0 || r.to < 0 {
			return reject(CodeInvalid, "%s time range: a time is not negative", r.name)
		}
		if r.from != 0 && r.to != 0 && r.from > r.to {
			return reject(CodeInvalid, "%s time range: from (%d) is later than to (%d)", r.name, r.from, r.to)
		}
	}
	return nil
}

// EmptyBulkFilter reports whether a filter matches every session.
func EmptyBulkFilter(f *fsmpb.BulkFilter) bool {
	return f == nil || f.Status == 0 && f.Agent == "" && f.ParentId == "" && f.ForkedFrom == "" && len(f.Labels) == 0 &&
		f.CreatedFromMs == 0 && f.CreatedToMs == 0 && f.UpdatedFromMs == 0 && f.UpdatedToMs == 0
}

// BulkSessionFilter is the list filter of a job: its filter, with the
// sessions created after the job left out (created_at_ms up to and
// including the job's creation).
func BulkSessionFilter(j *fsmpb.BulkJob) store.SessionFilter {
	f := j.GetFilter()
	out := store.SessionFilter{
		Status: f.GetStatus(), Agent: f.GetAgent(), ParentID: f.GetParentId(), ForkedFrom: f.GetForkedFrom(), Labels: f.GetLabels(),
		CreatedFrom: f.GetCreatedFromMs(), CreatedTo: f.GetCreatedToMs(),
		UpdatedFrom: f.GetUpdatedFromMs(), UpdatedTo: f.GetUpdatedToMs(),
	}
	if bound := j.CreatedAtMs + 1; out.CreatedTo == 0 || out.CreatedTo > bound {
		out.CreatedTo = bound
	}
	return out
}

// comparePosition orders a session's place in the created order against a
// cursor (the empty cursor is before every session).
func comparePosition(at int64, id string, c *fsmpb.BulkCursor) int {
	if c.GetId() == "" {
		return 1
	}
	return cmp.Or(cmp.Compare(at, c.AtMs), strings.Compare(id, c.Id))
}

func sameCursor(a, b *fsmpb.BulkCursor) bool {
	return a.GetAtMs() == b.GetAtMs() && a.GetId() == b.GetId()
}

func bulkEnded(j *fsmpb.BulkJob) bool { return j.Status != fsmpb.BulkJobStatus_BULK_JOB_STATUS_RUNNING }

// startBulkJob writes a new running job. It first drops the ended jobs past
// their retention and, when the table is full, the job that ended first.
func (a *applier) startBulkJob(c *fsmpb.StartBulkJob) *Result {
	if r := CheckBulkJob(c.Job); r != nil {
		return rejected(r)
	}
	if a.tx.BulkJob(c.Job.Id) != nil {
		return rejected(reject(CodeAlreadyExists, "bulk job %s exists", c.Job.Id))
	}
	var kept []*fsmpb.BulkJob
	var oldest *fsmpb.BulkJob // the job that ended first
	for j := range a.tx.BulkJobs() {
		if bulkEnded(j) && j.EndedAtMs < a.now-BulkRetentionMs {
			a.delete(store.TableBulkJobs, j)
			continue
		}
		kept = append(kept, j)
		if bulkEnded(j) && (oldest == nil || j.EndedAtMs < oldest.EndedAtMs) {
			oldest = j
		}
	}
	if len(kept) >= MaxBulkJobs {
		if oldest == nil {
			return rejected(reject(CodeFailedPrecondition, "%d bulk jobs are running, the most kept: cancel one or wait for one to end", len(kept)))
		}
		a.delete(store.TableBulkJobs, oldest)
	}
	j := &fsmpb.BulkJob{
		Id: c.Job.Id, Action: c.Job.Action, Filter: c.Job.Filter.CloneVT(), Reason: c.Job.Reason, By: c.Job.By,
		Status:      fsmpb.BulkJobStatus_BULK_JOB_STATUS_RUNNING,
		CreatedAtMs: a.now, UpdatedAtMs: a.now, Cursor: &fsmpb.BulkCursor{},
	}
	if j.Filter == nil {
		j.Filter = &fsmpb.BulkFilter{}
	}
	if len(c.Job.Labels) > 0 {
		labels, _ := withLabels(nil, c.Job.Labels, nil) // checked above
		j.Labels = labels
	}
	a.insert(store.TableBulkJobs, j)
	return &Result{}
}

// checkBulkJobStep refuses a malformed step: what needs no state.
func checkBulkJobStep(c *fsmpb.BulkJobStep) *Rejection {
	if r := CheckID("job id", c.JobId); r != nil {
		return r
	}
	if len(c.SessionIds) > MaxBulkStep {
		return reject(CodeInvalid, "a bulk step names at most %d sessions, got %d", MaxBulkStep, len(c.SessionIds))
	}
	if len(c.RetentionMs) != 0 && len(c.RetentionMs) != len(c.SessionIds) {
		return reject(CodeInvalid, "a bulk step gives %d retentions for %d sessions", len(c.RetentionMs), len(c.SessionIds))
	}
	if c.ToCursor.GetId() == "" && len(c.SessionIds) > 0 {
		return reject(CodeInvalid, "a bulk step that names sessions moves the cursor")
	}
	if !c.Last && comparePosition(c.ToCursor.GetAtMs(), c.ToCursor.GetId(), c.FromCursor) <= 0 {
		return reject(CodeInvalid, "a bulk step that is not the last moves the cursor forward")
	}
	return nil
}

// bulkJobStep acts on one page of a running job. A step of an ended job or
// read from another cursor changes nothing.
func (a *applier) bulkJobStep(c *fsmpb.BulkJobStep) *Result {
	stored := a.tx.BulkJob(c.JobId)
	if stored == nil {
		return rejected(reject(CodeNotFound, "bulk job %q not found", c.JobId))
	}
	if bulkEnded(stored) {
		return rejected(reject(CodeFailedPrecondition, "bulk job %s has ended", c.JobId))
	}
	if !sameCursor(stored.Cursor, c.FromCursor) {
		return rejected(reject(CodeFailedPrecondition, "bulk job %s is at another cursor: the step was applied before", c.JobId))
	}
	// Every session of the step lies after the job's cursor and up to the
	// step's: as the cursor only moves forward, no session is acted on
	// twice.
	for _, id := range c.SessionIds {
		if s := a.storedSession(id); s != nil && !hidden(s) {
			if comparePosition(s.CreatedAtMs, s.Id, c.FromCursor) <= 0 || (c.ToCursor.GetId() != "" && comparePosition(s.CreatedAtMs, s.Id, c.ToCursor) > 0) {
				return rejected(reject(CodeInvalid, "session %s of the step lies outside the step's cursors", id))
			}
		}
	}
	j := stored.CloneVT()
	filter := BulkSessionFilter(j)
	for i, id := range c.SessionIds {
		s := a.storedSession(id)
		if s == nil || hidden(s) {
			bulkSkip(j, SkipNotFound)
			continue
		}
		if !filter.Matches(s) {
			bulkSkip(j, SkipNoMatch)
			continue
		}
		var retention int64
		if len(c.RetentionMs) > 0 {
			retention = c.RetentionMs[i]
		}
		skip, res := a.bulkAct(j, s, retention)
		switch {
		case skip != "":
			bulkSkip(j, skip)
		case res.Err != nil:
			j.Failed++
		default:
			j.Acted++
		}
	}
	if c.ToCursor.GetId() != "" {
		j.Cursor = c.ToCursor.CloneVT()
	}
	j.Steps++
	j.UpdatedAtMs = a.now
	if c.Last {
		j.Status = fsmpb.BulkJobStatus_BULK_JOB_STATUS_DONE
		j.EndedAtMs = a.now
	}
	a.insert(store.TableBulkJobs, j)
	return &Result{}
}

// bulkAct gives session s the job's action, or says why it is skipped. The
// command applied checks its input before it writes, so one it refuses
// has written nothing.
func (a *applier) bulkAct(j *fsmpb.BulkJob, s *fsmpb.Session, retention int64) (string, *Result) {
	by := j.By
	if by == "" {
		by = defaultBulkUser
	}
	switch j.Action {
	case fsmpb.BulkAction_BULK_ACTION_CANCEL:
		switch {
		case isClosed(s):
			return SkipClosed, nil
		case s.Turn == nil:
			return SkipNoTurn, nil
		}
		return "", a.cancelTurn(&fsmpb.CancelTurn{SessionId: s.Id, By: by, Reason: j.Reason})
	case fsmpb.BulkAction_BULK_ACTION_RESUME:
		if s.Status != fsmpb.SessionStatus_SESSION_STATUS_PAUSED && s.Status != fsmpb.SessionStatus_SESSION_STATUS_ERRORED {
			return SkipNotPaused, nil
		}
		return "", a.resumeSession(&fsmpb.ResumeSession{SessionId: s.Id, Choice: fsmpb.ResumeChoice_RESUME_CHOICE_RETRY})
	case fsmpb.BulkAction_BULK_ACTION_CLOSE:
		if closing(s) {
			return SkipClosing, nil
		}
		return "", a.closeSession(&fsmpb.CloseSession{SessionId: s.Id, RetentionMs: retention})
	case fsmpb.BulkAction_BULK_ACTION_DELETE:
		if inTurn(s.Status) {
			return SkipInTurn, nil
		}
		return "", a.deleteSession(&fsmpb.DeleteSession{SessionId: s.Id})
	case fsmpb.BulkAction_BULK_ACTION_LABEL:
		if hasLabels(s, j.Labels) {
			return SkipHasLabels, nil
		}
		return "", a.setLabels(&fsmpb.SetLabels{SessionId: s.Id, Set: j.Labels})
	}
	return "", rejected(reject(CodeInvalid, "action %d is not a bulk action", j.Action))
}

// hasLabels reports whether s holds every label of want.
func hasLabels(s *fsmpb.Session, want []*fsmpb.Label) bool {
	for _, w := range want {
		if !slices.ContainsFunc(s.Labels, func(l *fsmpb.Label) bool { return l.Key == w.Key && l.Value == w.Value }) {
			return false
		}
	}
	return true
}

// bulkSkip counts one skipped session under reason, in the order the
// reasons first came (bounded: the rules name few).
func bulkSkip(j *fsmpb.BulkJob, reason string) {
	for _, s := range j.Skipped {
		if s.Reason == reason {
			s.Count++
			return
		}
	}
	if len(j.Skipped) < maxBulkSkipReasons {
		j.Skipped = append(j.Skipped, &fsmpb.BulkSkip{Reason: reason, Count: 1})
	}
}

// cancelBulkJob stops a running job; an ended one is left as it is.
func (a *applier) cancelBulkJob(c *fsmpb.CancelBulkJob) *Result {
	if r := CheckID("job id", c.JobId); r != nil {
		return rejected(r)
	}
	if len(c.By) > maxIDLength {
		return rejected(reject(CodeInvalid, "by is longer than %d bytes", maxIDLength))
	}
	stored := a.tx.BulkJob(c.JobId)
	if stored == nil {
		return rejected(reject(CodeNotFound, "bulk job %q not found", c.JobId))
	}
	if bulkEnded(stored) {
		return &Result{}
	}
	j := stored.CloneVT()
	j.Status = fsmpb.BulkJobStatus_BULK_JOB_STATUS_CANCELLED
	j.CancelledBy = c.By
	j.UpdatedAtMs, j.EndedAtMs = a.now, a.now
	a.insert(store.TableBulkJobs, j)
	return &Result{}
}

// BulkJob returns a job, or nil.
func (s *State) BulkJob(id string) *fsmpb.BulkJob { return s.tx.BulkJob(id) }

// BulkJobs returns every kept job (at most MaxBulkJobs), newest first.
func (s *State) BulkJobs() []*fsmpb.BulkJob {
	var out []*fsmpb.BulkJob
	for j := range s.tx.BulkJobs() {
		out = append(out, j)
	}
	slices.SortStableFunc(out, func(a, b *fsmpb.BulkJob) int {
		return cmp.Or(cmp.Compare(b.CreatedAtMs, a.CreatedAtMs), strings.Compare(a.Id, b.Id))
	})
	return out
}

// RunningBulkJobs returns the ids of the running jobs, by id.
func (s *State) RunningBulkJobs() []string {
	var out []string
	for j := range s.tx.BulkJobs() {
		if !bulkEnded(j) {
			out = append(out, j.Id)
		}
	}
	return out
}

// NextBulkStep reads the next page of a running job from this view: the
// matching sessions after its cursor, at most MaxBulkStep, and examining at
// most store.MaxListScan index entries. Nil when the job is not running.
func (s *State) NextBulkStep(id string, epoch uint64) *fsmpb.BulkJobStep {
	j := s.tx.BulkJob(id)
	if j == nil || bulkEnded(j) {
		return nil
	}
	var after *store.ListPosition
	if j.Cursor.GetId() != "" {
		after = &store.ListPosition{At: j.Cursor.AtMs, ID: j.Cursor.Id}
	}
	page, next := s.tx.ListSessions(BulkSessionFilter(j), store.ListByCreated, false, after, MaxBulkStep)
	step := &fsmpb.BulkJobStep{Epoch: epoch, JobId: id, FromCursor: j.Cursor.CloneVT()}
	if step.FromCursor == nil {
		step.FromCursor = &fsmpb.BulkCursor{}
	}
	for _, sess := range page {
		step.SessionIds = append(step.SessionIds, sess.Id)
	}
	switch {
	case next != nil:
		step.ToCursor = &fsmpb.BulkCursor{AtMs: next.At, Id: next.ID}
	case len(page) > 0:
		last := page[len(page)-1]
		step.ToCursor = &fsmpb.BulkCursor{AtMs: last.CreatedAtMs, Id: last.Id}
		step.Last = true
	default:
		step.ToCursor = step.FromCursor.CloneVT()
		step.Last = true
	}
	return step
}
