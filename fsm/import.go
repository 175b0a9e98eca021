package fsm

import (
	"google.golang.org/protobuf/proto"

	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/fsm/store"
)

// Importing an archived session. The leader's ImportSession verifies the
// whole archive object, then proposes ImportSessionBegin (the header and
// inbox), ImportSessionPage commands of bounded size (history, then Steps,
// then folded turns, then events, as the archive orders them) and ImportSessionEnd (the
// archive's counts). Until End the session row is a placeholder with no
// status of its own and the header to show inside its import field:
// every read and every other command treats it as absent, and no index of
// real statuses, due times or live Steps holds it or its rows.
//
// Only a session at rest is imported (idle, paused, errored or closed, as
// DeleteSession takes): a session in a turn has queued or running Steps
// whose Workers, leases and timers belong to the cluster that ran them,
// and bringing them back would need a recovery of their own. An archive
// holds sessions at rest anyway: the retentions delete only those.
//
// An import cut by a change of leader is not resumed: the new leader's
// RestartSessions turns every import of an earlier epoch into a deleted
// session, whose rows the collector purges as any other's. The client
// sends the object again.

const (
	// MaxImportRows bounds the rows of one ImportSessionPage (and the inbox
	// of an ImportSessionBegin), MaxImportBytes their encoded size unless
	// the page holds one row only (a row is at most the cluster's largest).
	MaxImportRows  = 500
	MaxImportBytes = 1 << 20
	// maxImportCounter bounds the counters an import brings (next Step,
	// turn, history entry, inbox message; the last event's seq).
	maxImportCounter = 1 << 62
)

// importing reports whether a session row is a placeholder of an import
// in progress.
func importing(s *fsmpb.Session) bool { return s.GetImport() != nil }

// atRest reports whether a session may be imported: no turn under way and
// no close waiting for one to end.
func atRest(s *fsmpb.Session) bool {
	switch s.Status {
	case fsmpb.SessionStatus_SESSION_STATUS_IDLE, fsmpb.SessionStatus_SESSION_STATUS_PAUSED,
		fsmpb.SessionStatus_SESSION_STATUS_ERRORED:
		return !closing(s)
	case fsmpb.SessionStatus_SESSION_STATUS_CLOSED:
		return true
	}
	return false
}

// checkImportRows refuses more rows than a page holds.
func checkImportRows(what string, n, size int) *Rejection {
	if n > MaxImportRows {
		return reject(CodeInvalid, "an import page holds at most %d rows, %s has %d", MaxImportRows, what, n)
	}
	if n > 1 && size > MaxImportBytes {
		return reject(CodeInvalid, "an import page holds at most %d bytes unless it is one row, %s has %d in %d rows", MaxImportBytes, what, size, n)
	}
	return nil
}

// checkImportBegin refuses a malformed ImportSessionBegin.
func checkImportBegin(c *fsmpb.ImportSessionBegin) *Rejection {
	s := c.Session
	if s == nil {
		return reject(CodeInvalid, "an import begins with the session's header")
	}
	if r := CheckID("session id", s.Id); r != nil {
		return r
	}
	if !atRest(s) {
		what := StatusName(s.Status)
		if closing(s) && !isClosed(s) {
			what = "closing"
		}
		return reject(CodeFailedPrecondition, "session %s was %s when it was archived: only a session at rest (idle, paused, errored or closed) is imported; export it again once its turn has ended", s.Id, what)
	}
	if s.Import != nil || len(s.History) > 0 || len(s.Inbox) > 0 || len(s.SeenMessageIds) > 0 {
		return reject(CodeInvalid, "the header of an import carries no rows: its inbox comes beside it, its history in pages")
	}
	// Labels are kept sorted by key, each key once (withLabels).
	if r := CheckLabels(s.Labels); r != nil {
		return reject(CodeInvalid, "session %s: %s", s.Id, r.Reason)
	}
	for i := 1; i < len(s.Labels); i++ {
		if s.Labels[i-1].Key > s.Labels[i].Key {
			return reject(CodeInvalid, "session %s: its labels are not in key order", s.Id)
		}
	}
	// Counters the cluster goes on from: far from their end, so the next
	// Step, entry or event never wraps.
	for _, n := range []uint64{s.NextStep, s.NextTurn, s.NextHistory, s.NextInbox, c.LastEventSeq} {
		if n > maxImportCounter {
			return reject(CodeInvalid, "session %s carries a counter of %d, over %d: not a session a cluster wrote", s.Id, n, uint64(maxImportCounter))
		}
	}
	if uint64(len(c.Inbox)) != uint64(s.InboxCount) {
		return reject(CodeInvalid, "session %s counts %d inbox messages, the import brings %d", s.Id, s.InboxCount, len(c.Inbox))
	}
	size, last := 0, uint64(0)
	for _, m := range c.Inbox {
		if m.SessionId != s.Id || m.Seq <= last || m.Seq >= s.NextInbox {
			return reject(CodeInvalid, "inbox message %d is not the next one of session %s (after %d, below %d)", m.Seq, s.Id, last, s.NextInbox)
		}
		size += proto.Size(m)
		last = m.Seq
	}
	return checkImportRows("the inbox", len(c.Inbox), size)
}

// importOf returns a copy of the placeholder of an import in progress,
// refusing a command of another epoch.
func (a *applier) importOf(id string, epoch uint64) (*fsmpb.Session, *Rejection) {
	if r := CheckID("session id", id); r != nil {
		return nil, r
	}
	s := a.storedSession(id)
	if s == nil || !importing(s) {
		return nil, reject(CodeNotFound, "no import of session %q is in progress (a change of leader discards one: send it again)", id)
	}
	if s.Import.Epoch != epoch {
		return nil, reject(CodeFailedPrecondition, "the import of session %s began in epoch %d, not %d", id, s.Import.Epoch, epoch)
	}
	return s.CloneVT(), nil
}

func (a *applier) importSessionBegin(c *fsmpb.ImportSessionBegin) *Result {
	id := c.Session.Id
	if old := a.storedSession(id); old != nil {
		switch {
		case importing(old):
			return rejected(reject(CodeAlreadyExists, "session %q is being imported", id))
		case deleted(old):
			return rejected(reject(CodeAlreadyExists, "session %q was deleted and its rows are still being removed: import it again once they are", id))
		}
		return rejected(reject(CodeAlreadyExists, "session %q already exists", id))
	}
	header := c.Session.CloneVT()
	a.insert(store.TableSessions, &fsmpb.Session{
		Id: id, UpdatedAtMs: a.now,
		Import: &fsmpb.SessionImport{Epoch: c.Epoch, Session: header, LastSeq: c.LastEventSeq},
	})
	for _, m := range c.Inbox {
		a.insert(store.TableInbox, m.CloneVT())
		if m.Id != "" {
			a.insert(store.TableAccepted, &fsmpb.AcceptedMessage{SessionId: id, MessageId: m.Id})
		}
	}
	return &Result{SessionID: id}
}

// checkImportPage refuses a page of too many rows or bytes.
func checkImportPage(c *fsmpb.ImportSessionPage) *Rejection {
	if r := CheckID("session id", c.SessionId); r != nil {
		return r
	}
	n, size := len(c.History)+len(c.Steps)+len(c.Folded)+len(c.Events), 0
	if n == 0 {
		return reject(CodeInvalid, "an import page holds at least one row")
	}
	for _, h := range c.History {
		size += proto.Size(h)
	}
	for _, st := range c.Steps {
		size += proto.Size(st)
	}
	for _, f := range c.Folded {
		size += proto.Size(f)
	}
	for _, ev := range c.Events {
		size += proto.Size(ev)
	}
	return checkImportRows("this page", n, size)
}

func (a *applier) importSessionPage(c *fsmpb.ImportSessionPage) *Result {
	s, r := a.importOf(c.SessionId, c.Epoch)
	if r != nil {
		return rejected(r)
	}
	imp := s.Import
	if r := checkPageRows(imp, c); r != nil {
		return rejected(r)
	}
	id := imp.Session.Id
	for _, h := range c.History {
		a.insert(store.TableHistory, h.CloneVT())
		if h.MessageId != "" { // a repeat of the message changes nothing, as before
			a.insert(store.TableAccepted, &fsmpb.AcceptedMessage{SessionId: id, MessageId: h.MessageId})
		}
	}
	for _, st := range c.Steps {
		a.insert(store.TableSteps, st.CloneVT())
	}
	for _, f := range c.Folded {
		a.insert(store.TableFoldedTurns, f.CloneVT())
	}
	for i, ev := range c.Events {
		a.importEvent(id, ev.CloneVT(), i == 0 && imp.Events == 0)
	}
	advanceImport(imp, c)
	a.insert(store.TableSessions, s)
	return &Result{SessionID: s.Id}
}

// importEvent adds an event to the session's event pages, as emit would
// have kept it, and starts the session's event log with the first.
func (a *applier) importEvent(id string, ev *fsmpb.Event, first bool) {
	if p := a.tx.LastEventPage(id); p != nil && p.Len() < store.EventPageSize {
		a.insert(store.TableEvents, p.WithEvent(ev))
	} else {
		a.insert(store.TableEvents, store.NewEventPage(id, ev))
	}
	if first {
		log := &fsmpb.EventLog{SessionId: id, FirstSeq: ev.Seq, FirstOrdinal: ev.Ordinal, FirstAtMs: ev.AtMs}
		if ev.Ordinal > 1 { // the ones before it were dropped
			log.DroppedThrough = ev.Seq - 1
		}
		a.insert(store.TableEventLogs, log)
	}
}

// checkPageRows refuses a page whose rows do not follow what the import
// received so far: the archive's order (history, Steps, folded turns,
// events, each in order), rows of the session, a history whose sizes add
// up, Steps that have ended, folded turns the header counts as folded,
// events numbered on from the last.
func checkPageRows(imp *fsmpb.SessionImport, c *fsmpb.ImportSessionPage) *Rejection {
	id := imp.Session.Id
	last, size := imp.LastHistorySeq, imp.HistorySize
	for _, h := range c.History {
		switch {
		case imp.Steps > 0 || imp.Folded > 0 || imp.Events > 0:
			return reject(CodeInvalid, "history entry %d comes after the Steps, folded turns or events of session %s: an import is in archive order", h.Seq, id)
		case h.SessionId != id:
			return reject(CodeInvalid, "history entry %d is of session %q, not %s", h.Seq, h.SessionId, id)
		case h.Seq <= last || h.Seq >= imp.Session.NextHistory:
			return reject(CodeInvalid, "history entry %d of session %s is out of order (after %d, below %d)", h.Seq, id, last, imp.Session.NextHistory)
		case h.CumSize != size+store.EntrySize(h):
			return reject(CodeInvalid, "history entry %d of session %s has cum_size %d, its entries add up to %d", h.Seq, id, h.CumSize, size+store.EntrySize(h))
		}
		last, size = h.Seq, h.CumSize
	}
	lastStep := imp.LastStepNumber
	for _, st := range c.Steps {
		switch {
		case imp.Folded > 0 || imp.Events > 0:
			return reject(CodeInvalid, "Step %s comes after the folded turns or events of session %s: an import is in archive order", st.Id, id)
		case st.SessionId != id || st.Id != StepID(id, st.Number):
			return reject(CodeInvalid, "Step %q is not Step %d of session %s", st.Id, st.Number, id)
		case st.Number <= lastStep || st.Number >= imp.Session.NextStep:
			return reject(CodeInvalid, "Step %s of session %s is out of order (after %d, below %d)", st.Id, id, lastStep, imp.Session.NextStep)
		case st.Status != fsmpb.StepStatus_STEP_STATUS_DONE:
			return reject(CodeFailedPrecondition, "Step %s has not ended: only a session at rest, whose Steps have all ended, is imported", st.Id)
		}
		for _, at := range st.Attempts {
			if at.Status == fsmpb.AttemptStatus_ATTEMPT_STATUS_RUNNING {
				return reject(CodeFailedPrecondition, "attempt %d of Step %s is running: only a session at rest is imported", at.N, st.Id)
			}
		}
		lastStep = st.Number
	}
	lastTurn := imp.LastFoldedTurn
	for _, f := range c.Folded {
		switch {
		case imp.Events > 0:
			return reject(CodeInvalid, "folded turn %d comes after the events of session %s: an import is in archive order", f.Turn, id)
		case f.SessionId != id:
			return reject(CodeInvalid, "folded turn %d is of session %q, not %s", f.Turn, f.SessionId, id)
		case f.Turn <= lastTurn || f.Turn > imp.Session.FoldedThroughTurn:
			return reject(CodeInvalid, "folded turn %d of session %s is out of order (after %d, at most %d, the turn it is folded through)", f.Turn, id, lastTurn, imp.Session.FoldedThroughTurn)
		case f.Steps == 0:
			return reject(CodeInvalid, "folded turn %d of session %s folds no Step", f.Turn, id)
		}
		lastTurn = f.Turn
	}
	lastEv, ordinal := imp.LastEventSeq, imp.LastEventOrdinal
	for _, ev := range c.Events {
		switch {
		case ev.SessionId != id:
			return reject(CodeInvalid, "event %d is of session %q, not %s", ev.Seq, ev.SessionId, id)
		case ev.Seq <= lastEv || ev.Seq > imp.LastSeq:
			return reject(CodeInvalid, "event %d of session %s is out of order (after %d, at most %d)", ev.Seq, id, lastEv, imp.LastSeq)
		case ev.Ordinal == 0 || (ordinal != 0 && ev.Ordinal != ordinal+1):
			return reject(CodeInvalid, "event %d of session %s has ordinal %d, not the one after %d", ev.Seq, id, ev.Ordinal, ordinal)
		}
		lastEv, ordinal = ev.Seq, ev.Ordinal
	}
	return nil
}

// advanceImport counts a page's rows into what the import received.
func advanceImport(imp *fsmpb.SessionImport, c *fsmpb.ImportSessionPage) {
	for _, h := range c.History {
		imp.History++
		imp.LastHistorySeq, imp.HistorySize = h.Seq, h.CumSize
	}
	for _, st := range c.Steps {
		imp.Steps++
		imp.LastStepNumber = st.Number
	}
	for _, f := range c.Folded {
		imp.Folded++
		imp.LastFoldedTurn = f.Turn
		imp.FoldedSteps += uint64(f.Steps)
	}
	for _, ev := range c.Events {
		imp.Events++
		imp.LastEventSeq, imp.LastEventOrdinal = ev.Seq, ev.Ordinal
	}
}

// checkEnd refuses an end whose counts are not what the pages brought.
func checkEnd(imp *fsmpb.SessionImport, c *fsmpb.ImportSessionEnd) *Rejection {
	s := imp.Session
	switch {
	case imp.History != c.History || imp.Steps != c.Steps || imp.Folded != c.Folded || imp.Events != c.Events:
		return reject(CodeInvalid, "the import of session %s brought %d history entries, %d Steps, %d folded turns and %d events; its archive counts %d, %d, %d and %d",
			s.Id, imp.History, imp.Steps, imp.Folded, imp.Events, c.History, c.Steps, c.Folded, c.Events)
	case imp.FoldedSteps != s.FoldedSteps:
		return reject(CodeInvalid, "session %s counts %d folded Steps, its folded turns fold %d", s.Id, s.FoldedSteps, imp.FoldedSteps)
	case imp.History != s.HistoryCount || imp.HistorySize != s.HistorySize:
		return reject(CodeInvalid, "session %s counts %d history entries of %d characters, the import brought %d of %d",
			s.Id, s.HistoryCount, s.HistorySize, imp.History, imp.HistorySize)
	case imp.Events > 0 && imp.LastEventSeq != imp.LastSeq:
		return reject(CodeInvalid, "session %s's last event is %d, the import's last is %d", s.Id, imp.LastSeq, imp.LastEventSeq)
	}
	return nil
}

// CheckImport runs the checks of an import's commands against one another,
// without the state: what Begin, each Page and End would refuse for their
// content. The leader runs it before it proposes Begin, so an import it
// starts is refused, if at all, for what the state holds (the id is taken,
// the leader changed) and not half-way for its content.
func CheckImport(begin *fsmpb.ImportSessionBegin, pages []*fsmpb.ImportSessionPage, end *fsmpb.ImportSessionEnd) *Rejection {
	if r := checkImportBegin(begin); r != nil {
		return r
	}
	imp := &fsmpb.SessionImport{Epoch: begin.Epoch, Session: begin.Session, LastSeq: begin.LastEventSeq}
	for _, p := range pages {
		if r := checkImportPage(p); r != nil {
			return r
		}
		if p.SessionId != begin.Session.Id {
			return reject(CodeInvalid, "a page of session %q in the import of %s", p.SessionId, begin.Session.Id)
		}
		if r := checkPageRows(imp, p); r != nil {
			return r
		}
		advanceImport(imp, p)
	}
	if r := checkImportEnd(end); r != nil {
		return r
	}
	return checkEnd(imp, end)
}

func checkImportEnd(c *fsmpb.ImportSessionEnd) *Rejection {
	return CheckID("session id", c.SessionId)
}

// importSessionEnd checks that the pages brought what the archive counts
// and shows the session: the header as archived, but a closed session's
// retention counts from now.
func (a *applier) importSessionEnd(c *fsmpb.ImportSessionEnd) *Result {
	row, r := a.importOf(c.SessionId, c.Epoch)
	if r != nil {
		return rejected(r)
	}
	imp := row.Import
	s := imp.Session
	if r := checkEnd(imp, c); r != nil {
		return rejected(r)
	}
	if imp.Events == 0 && imp.LastSeq > 0 { // it keeps none: all were dropped
		a.insert(store.TableEventLogs, &fsmpb.EventLog{SessionId: s.Id, DroppedThrough: imp.LastSeq})
	}
	if isClosed(s) {
		s.DeleteAtMs = 0
		if ms := s.GetRetentionMs(); ms > 0 {
			s.DeleteAtMs = a.now + ms
		}
	}
	// Events emitted from now on come after the imported ones.
	if m := a.meta(); m.NextEventSeq < imp.LastSeq {
		m.NextEventSeq = imp.LastSeq
	}
	// Not putSession: the header keeps its times as archived. The cluster's
	// own folding setting says what it is owed.
	s.FoldDueThrough = foldDueThrough(s, a.meta().GetKeepTurnSteps())
	a.insert(store.TableSessions, s)
	a.touched.session(s.Id)
	return &Result{SessionID: s.Id}
}

// discardImports turns every import begun before epoch into a deleted
// session, whose rows the collector purges; the caller is the new
// leader's RestartSessions. Imports are few: one per client sending one.
func (a *applier) discardImports(epoch uint64) {
	var doomed []*fsmpb.Session
	for s := range a.tx.SessionsAtRest(fsmpb.SessionStatus_SESSION_STATUS_UNSPECIFIED) {
		if importing(s) && s.Import.Epoch < epoch {
			doomed = append(doomed, s)
		}
	}
	for _, s := range doomed {
		a.insert(store.TableSessions, &fsmpb.Session{Id: s.Id, Status: fsmpb.SessionStatus_SESSION_STATUS_DELETED, UpdatedAtMs: a.now})
	}
}
