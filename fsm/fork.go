package fsm

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/fsm/store"
)

// Forking a session (docs/forks.md). The leader reads the source's entries
// up to and including at_seq from one consistent view and proposes
// ForkSessionBegin (the new session's header), ImportSessionPage commands
// of at most MaxImportRows entries and MaxImportBytes each (the import's
// pages, so the fork is a placeholder hidden from every read until it
// ends, and a change of leader discards it as it discards an import), and
// ForkSessionEnd, which shows the fork and starts its first turn when the
// fork was asked with a message. The entries are copied, not shared: the
// fork stands on its own whatever later happens to the source (an edit, a
// deletion), and every reader of a history reads one session's rows.
//
// The fork names its source (forked_from, forked_at_seq); the source's row
// is not written: the list index finds a source's forks (ListSessions
// forked_from), so forking a session many times grows no row of it. The
// source's event log records each fork (fork_created).

// ForkLogVersion is the log version that brought ForkSessionBegin and
// ForkSessionEnd: a leader forks only once every member applies them.
const ForkLogVersion = 4

// ForkOptions is what a fork request chooses beside its source and seq.
type ForkOptions struct {
	// ID is the new session's id (the leader draws it in the source's
	// partition when the request names none).
	ID string
	// Agent and Provider replace the source's when Agent is not empty.
	Agent, Provider string
	// Labels replace the source's when not nil (they are checked).
	Labels []*fsmpb.Label
	// Message, if not empty, starts the fork's first turn; MessageID is its
	// idempotency key.
	Message, MessageID string
}

// checkForkPoint refuses to fork session s at atSeq: an entry it does not
// hold, an entry of a turn that has not ended, and a cut between a model
// output and its tool results. It reads at most two history rows.
func checkForkPoint(tx *store.Txn, s *fsmpb.Session, atSeq uint64) *Rejection {
	if atSeq == 0 {
		return reject(CodeInvalid, "at_seq is required: the seq of the history entry of session %s the fork's history ends with", s.Id)
	}
	if atSeq >= s.NextHistory || tx.HistoryEntry(s.Id, atSeq) == nil {
		if s.HistoryCount == 0 {
			return reject(CodeInvalid, "session %s has no history entry %d: its history is empty", s.Id, atSeq)
		}
		last := tx.HistoryBefore(s.Id, s.NextHistory)
		return reject(CodeInvalid, "session %s has no history entry %d: its entries go up to %d", s.Id, atSeq, last.GetSeq())
	}
	if t := s.Turn; t != nil {
		switch {
		case t.FirstHistorySeq == 0:
			return reject(CodeFailedPrecondition, "session %s is %s in turn %d, which began before Dex recorded where a turn begins: fork it once the turn ends",
				s.Id, StatusName(s.Status), t.Number)
		case atSeq >= t.FirstHistorySeq:
			return reject(CodeFailedPrecondition, "entry %d of session %s is inside turn %d, which has not ended (the session is %s): fork at an entry before %d, or once the turn ends",
				atSeq, s.Id, t.Number, StatusName(s.Status), t.FirstHistorySeq)
		}
	}
	var next *fsmpb.HistoryEntry
	tx.SessionRows(store.TableHistory, s.Id, atSeq+1, func(raw any) bool {
		next = raw.(*fsmpb.HistoryEntry)
		return false
	})
	if next.GetKind() == fsmpb.HistoryKind_HISTORY_KIND_TOOL_RESULT {
		return reject(CodeInvalid, "session %s: entry %d is followed by entry %d, a tool result of the same model output: fork at that output's last tool result, or before the output",
			s.Id, atSeq, next.Seq)
	}
	return nil
}

// CheckFork refuses to fork the session sourceID at atSeq, as
// ForkSessionBegin would in this state.
func (s *State) CheckFork(sourceID string, atSeq uint64) *Rejection {
	src := s.Session(sourceID)
	if src == nil {
		return reject(CodeNotFound, "session %q not found", sourceID)
	}
	return checkForkPoint(s.tx, src, atSeq)
}

// ForkCommands builds the commands of a fork of sourceID at atSeq in
// epoch, from this view of the state: the header, the pages of copied
// entries and the end. A rejection says why the fork is refused; nothing
// has been proposed then.
func (s *State) ForkCommands(sourceID string, atSeq uint64, o ForkOptions, epoch uint64) (*fsmpb.ForkSessionBegin, []*fsmpb.ImportSessionPage, *fsmpb.ForkSessionEnd, *Rejection) {
	if r := s.CheckFork(sourceID, atSeq); r != nil {
		return nil, nil, nil, r
	}
	src := s.Session(sourceID)
	header, r := forkHeader(src, atSeq, o)
	if r != nil {
		return nil, nil, nil, r
	}
	var pages []*fsmpb.ImportSessionPage
	page, size := &fsmpb.ImportSessionPage{SessionId: o.ID, Epoch: epoch}, 0
	var latestSummary uint64
	s.tx.SessionRows(store.TableHistory, sourceID, 0, func(raw any) bool {
		e := raw.(*fsmpb.HistoryEntry)
		if e.Seq > atSeq {
			return false
		}
		row := e.CloneVT()
		row.SessionId = o.ID
		header.HistorySize += store.EntrySize(row)
		row.CumSize = header.HistorySize
		header.HistoryCount++
		if row.Kind == fsmpb.HistoryKind_HISTORY_KIND_SUMMARY {
			header.Summaries++
			latestSummary = row.Seq
		}
		n := proto.Size(row)
		if len(page.History) > 0 && (len(page.History) == MaxImportRows || size+n > MaxImportBytes) {
			pages = append(pages, page)
			page, size = &fsmpb.ImportSessionPage{SessionId: o.ID, Epoch: epoch}, 0
		}
		page.History = append(page.History, row)
		size += n
		return true
	})
	pages = append(pages, page) // at least the entry at atSeq
	// The copy is the source's history cut after atSeq, and its compaction
	// state is what an edit cutting there leaves (truncateHistory): kept
	// when the boundary and the summary standing for what lies before it
	// are in the copy, else the whole copy goes to the model, led by its
	// latest summary.
	if src.CompactedBefore <= atSeq && src.LatestSummarySeq <= atSeq {
		header.CompactedBefore, header.LatestSummarySeq = src.CompactedBefore, src.LatestSummarySeq
	} else {
		header.CompactedBefore, header.LatestSummarySeq = 0, latestSummary
	}
	begin := &fsmpb.ForkSessionBegin{Epoch: epoch, SourceId: sourceID, AtSeq: atSeq, Session: header}
	end := &fsmpb.ForkSessionEnd{Epoch: epoch, SessionId: o.ID, Message: o.Message, MessageId: o.MessageID}
	if r := checkForkBegin(begin); r != nil {
		return nil, nil, nil, r
	}
	if r := checkForkEnd(end); r != nil {
		return nil, nil, nil, r
	}
	return begin, pages, end, nil
}

// forkHeader is the fork's session as it starts: the source's settings
// (agent, provider, labels, compaction, model input limit, retention,
// budget limits, dispatch order) with the options' replacements, no
// parent, no turn, no usage, and its counters going on from atSeq.
func forkHeader(src *fsmpb.Session, atSeq uint64, o ForkOptions) (*fsmpb.Session, *Rejection) {
	h := &fsmpb.Session{
		Id:                  o.ID,
		Status:              fsmpb.SessionStatus_SESSION_STATUS_IDLE,
		CompactionThreshold: src.CompactionThreshold,
		MaxModelInput:       src.MaxModelInput,
		Agent:               src.Agent,
		Provider:            src.Provider,
		Budget:              src.Budget.CloneVT(),
		Priority:            src.Priority,
		FairnessKey:         src.FairnessKey,
		FairnessWeight:      src.FairnessWeight,
		NextStep:            1,
		NextTurn:            1,
		NextHistory:         atSeq + 1,
		NextInbox:           1,
		ForkedFrom:          src.Id,
		ForkedAtSeq:         atSeq,
	}
	if src.RetentionMs != nil {
		h.RetentionMs = proto.Int64(*src.RetentionMs)
	}
	for _, l := range src.Labels {
		h.Labels = append(h.Labels, l.CloneVT())
	}
	if o.Agent != "" {
		if r := CheckAgent(o.Agent); r != nil {
			return nil, r
		}
		h.Agent, h.Provider = o.Agent, o.Provider
	}
	if o.Labels != nil {
		labels, r := withLabels(nil, o.Labels, nil)
		if r != nil {
			return nil, r
		}
		h.Labels = labels
	}
	return h, nil
}

// checkForkBegin refuses a malformed ForkSessionBegin: what needs no state.
func checkForkBegin(c *fsmpb.ForkSessionBegin) *Rejection {
	if r := CheckID("source session id", c.SourceId); r != nil {
		return r
	}
	h := c.Session
	if h == nil {
		return reject(CodeInvalid, "a fork begins with the new session's header")
	}
	if r := CheckID("session id", h.Id); r != nil {
		return r
	}
	switch {
	case h.Id == c.SourceId:
		return reject(CodeInvalid, "a fork of session %s needs an id of its own", c.SourceId)
	case h.ForkedFrom != c.SourceId || h.ForkedAtSeq != c.AtSeq || c.AtSeq == 0:
		return reject(CodeInvalid, "the header of fork %s names %s at %d, the command %s at %d", h.Id, h.ForkedFrom, h.ForkedAtSeq, c.SourceId, c.AtSeq)
	case h.NextHistory != c.AtSeq+1 || h.HistoryCount == 0 || h.HistoryCount > c.AtSeq:
		return reject(CodeInvalid, "fork %s of %s at %d: its header counts %d entries going on at %d", h.Id, c.SourceId, c.AtSeq, h.HistoryCount, h.NextHistory)
	case h.Status != fsmpb.SessionStatus_SESSION_STATUS_IDLE || h.Turn != nil || h.ParentId != "" || h.Import != nil:
		return reject(CodeInvalid, "fork %s starts idle, with no turn, parent or import", h.Id)
	case len(h.History) > 0 || len(h.Inbox) > 0 || len(h.SeenMessageIds) > 0 || h.InboxCount > 0:
		return reject(CodeInvalid, "the header of fork %s carries no rows: its history comes in pages", h.Id)
	case h.LatestSummarySeq > c.AtSeq || h.CompactedBefore > c.AtSeq:
		return reject(CodeInvalid, "fork %s ends at %d, its compaction state names entry %d or %d", h.Id, c.AtSeq, h.LatestSummarySeq, h.CompactedBefore)
	}
	if r := CheckAgent(h.Agent); r != nil {
		return r
	}
	if r := CheckLabels(h.Labels); r != nil {
		return r
	}
	for i := 1; i < len(h.Labels); i++ {
		if h.Labels[i-1].Key > h.Labels[i].Key {
			return reject(CodeInvalid, "fork %s: its labels are not in key order", h.Id)
		}
	}
	return nil
}

// forkSessionBegin refuses a fork the state does not allow (an unknown
// source, a bad fork point, a taken id) and otherwise writes the fork's
// placeholder. A refusal changes nothing.
func (a *applier) forkSessionBegin(c *fsmpb.ForkSessionBegin) *Result {
	src, r := a.session(c.SourceId)
	if r != nil {
		return rejected(r)
	}
	if r := checkForkPoint(a.tx, src, c.AtSeq); r != nil {
		return rejected(r)
	}
	id := c.Session.Id
	if old := a.storedSession(id); old != nil {
		switch {
		case importing(old):
			return rejected(reject(CodeAlreadyExists, "session %q is being imported or forked", id))
		case deleted(old):
			return rejected(reject(CodeAlreadyExists, "session %q was deleted and its rows are still being removed: use another id", id))
		}
		return rejected(reject(CodeAlreadyExists, "session %q already exists", id))
	}
	a.insert(store.TableSessions, &fsmpb.Session{
		Id: id, UpdatedAtMs: a.now,
		Import: &fsmpb.SessionImport{Epoch: c.Epoch, Session: c.Session.CloneVT()},
	})
	return &Result{SessionID: id}
}

func checkForkEnd(c *fsmpb.ForkSessionEnd) *Rejection {
	if r := CheckID("session id", c.SessionId); r != nil {
		return r
	}
	if c.Message != "" {
		return CheckKey("message id", c.MessageId)
	}
	return nil
}

// forkSessionEnd checks that the pages brought the entries the header
// counts, shows the fork, records it in the source's events and, with a
// message, starts the fork's first turn.
func (a *applier) forkSessionEnd(c *fsmpb.ForkSessionEnd) *Result {
	row, r := a.importOf(c.SessionId, c.Epoch)
	if r != nil {
		return rejected(r)
	}
	imp := row.Import
	s := imp.Session
	switch {
	case s.ForkedFrom == "":
		return rejected(reject(CodeInvalid, "session %s is being imported, not forked", s.Id))
	case imp.History != s.HistoryCount || imp.HistorySize != s.HistorySize || imp.Steps+imp.Folded+imp.Events > 0:
		return rejected(reject(CodeInvalid, "fork %s counts %d history entries of %d characters, its pages brought %d of %d (and %d other rows)",
			s.Id, s.HistoryCount, s.HistorySize, imp.History, imp.HistorySize, imp.Steps+imp.Folded+imp.Events))
	}
	if seq := s.LatestSummarySeq; seq != 0 && a.tx.HistoryEntry(s.Id, seq).GetKind() != fsmpb.HistoryKind_HISTORY_KIND_SUMMARY {
		return rejected(reject(CodeInvalid, "fork %s names entry %d as its latest summary, which its pages did not bring", s.Id, seq))
	}
	s.CreatedAtMs = a.now
	a.emit(s.Id, "session_created", "", "")
	a.emit(s.Id, "session_forked", "", fmt.Sprintf("%s at entry %d", s.ForkedFrom, s.ForkedAtSeq))
	if src, r := a.session(s.ForkedFrom); r == nil {
		a.emit(src.Id, "fork_created", "", fmt.Sprintf("%s at entry %d", s.Id, s.ForkedAtSeq))
	}
	if c.Message != "" {
		a.receive(s, &fsmpb.InboxMessage{Id: c.MessageId, Text: c.Message, ReceivedAtMs: a.now})
	}
	a.putSession(s)
	return &Result{SessionID: s.Id}
}
