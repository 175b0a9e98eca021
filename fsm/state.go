package fsm

import (
	"math"

	"google.golang.org/protobuf/proto"

	memdb "github.com/hashicorp/go-memdb"

	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/fsm/store"
)

// State is a consistent read-only view of the replicated state. Objects it
// returns are shared with the store: callers must not modify them.
type State struct {
	tx      *store.Txn
	abandon <-chan struct{}
}

// Abandoned is closed when a snapshot restore replaced the state this view
// reads: a watcher of it must read a new State.
func (s *State) Abandoned() <-chan struct{} { return s.abandon }

// Meta returns the cluster-wide counters (epoch, applied index…).
func (s *State) Meta() *fsmpb.ClusterMeta {
	return s.tx.Meta()
}

// Session returns a session or nil (a deleted one, or one being imported,
// is nil too).
func (s *State) Session(id string) *fsmpb.Session {
	sess := s.tx.Session(id)
	if sess == nil || hidden(sess) {
		return nil
	}
	return sess
}

// Sessions returns every session in id order, deleted ones and those being
// imported left out.
func (s *State) Sessions() []*fsmpb.Session {
	var out []*fsmpb.Session
	for sess := range s.tx.Sessions() {
		if !hidden(sess) {
			out = append(out, sess)
		}
	}
	return out
}

// Step returns a Step or nil.
func (s *State) Step(id string) *fsmpb.Step {
	return s.tx.Step(id)
}

// Steps returns the Steps of a session in creation order.
func (s *State) Steps(sessionID string) []*fsmpb.Step {
	steps, _ := s.StepsPage(sessionID, 0, math.MaxInt, math.MaxInt)
	return steps
}

// RunningSteps returns how many attempts run now and a channel closed when
// a Step starts or stops running.
func (s *State) RunningSteps() (int, <-chan struct{}) {
	return s.tx.RunningStepsWatch()
}

// StepsWithStatus returns the Steps in a status (queued, running, waiting).
func (s *State) StepsWithStatus(st fsmpb.StepStatus) []*fsmpb.Step {
	var out []*fsmpb.Step
	for step := range s.tx.LiveSteps(st) {
		out = append(out, step)
	}
	return out
}

// Nodes returns the known node addresses in id order.
func (s *State) Nodes() []*fsmpb.NodeInfo {
	return store.All[*fsmpb.NodeInfo](s.tx, store.TableNodes, store.IndexID)
}

// Workers returns the registered Workers in id order.
func (s *State) Workers() []*fsmpb.WorkerInfo {
	return store.All[*fsmpb.WorkerInfo](s.tx, store.TableWorkers, store.IndexID)
}

// WatchSet returns a watch that fires on the next applied entry.
func (s *State) WatchSet() memdb.WatchSet {
	ws := memdb.NewWatchSet()
	ws.Add(s.abandon)
	if ch := s.tx.MetaWatch(); ch != nil {
		ws.Add(ch)
	}
	return ws
}

// History returns up to limit history entries of a session with a seq above
// after, in order, and the seq to read on from (0 when none is left). A page
// also stops once it holds maxBytes of entries, after at least one entry.
func (s *State) History(sessionID string, after uint64, limit int, maxBytes int) ([]*fsmpb.HistoryEntry, uint64) {
	var out []*fsmpb.HistoryEntry
	var next uint64
	size := 0
	s.tx.SessionRows(store.TableHistory, sessionID, after+1, func(raw any) bool {
		e := raw.(*fsmpb.HistoryEntry)
		if len(out) >= limit || (len(out) > 0 && size+proto.Size(e) > maxBytes) {
			next = out[len(out)-1].Seq
			return false
		}
		size += proto.Size(e)
		out = append(out, e)
		return true
	})
	return out, next
}

// Inbox returns the session's messages not yet consumed by a turn, the
// oldest first, up to maxBytes of them (at least one).
func (s *State) Inbox(sessionID string, maxBytes int) []*fsmpb.InboxMessage {
	var out []*fsmpb.InboxMessage
	size := 0
	s.tx.SessionRows(store.TableInbox, sessionID, 0, func(raw any) bool {
		m := raw.(*fsmpb.InboxMessage)
		if len(out) > 0 && size+proto.Size(m) > maxBytes {
			return false
		}
		size += proto.Size(m)
		out = append(out, m)
		return true
	})
	return out
}

// ModelHistory is what the model is sent of a session: the latest summary,
// if any, then every other entry from the compaction boundary on.
func (s *State) ModelHistory(sess *fsmpb.Session) []*fsmpb.HistoryEntry {
	return s.summarised(sess, 0)
}

// ToCompact is what a CompactContext Step summarises: the latest summary, if
// any, and the entries after it up to (not including) seq before.
func (s *State) ToCompact(sess *fsmpb.Session, before uint64) []*fsmpb.HistoryEntry {
	return s.summarised(sess, before)
}

// summarised returns the latest summary past the compaction boundary, then
// the other entries from the boundary up to seq to (0: no end).
func (s *State) summarised(sess *fsmpb.Session, to uint64) []*fsmpb.HistoryEntry {
	if sess == nil {
		return nil
	}
	var out []*fsmpb.HistoryEntry
	if seq := sess.LatestSummarySeq; seq != 0 && seq >= sess.CompactedBefore {
		if e := s.tx.HistoryEntry(sess.Id, seq); e != nil {
			out = append(out, e)
		}
	}
	s.tx.SessionRows(store.TableHistory, sess.Id, sess.CompactedBefore, func(raw any) bool {
		e := raw.(*fsmpb.HistoryEntry)
		if to > 0 && e.Seq >= to {
			return false
		}
		if e.Kind != fsmpb.HistoryKind_HISTORY_KIND_SUMMARY {
			out = append(out, e)
		}
		return true
	})
	return out
}

// StepsPage returns up to limit Steps of a session with a number above
// after, in order, and the number to read on from (0 when none is left). A
// page also stops once it holds maxBytes, after at least one Step.
func (s *State) StepsPage(sessionID string, after uint64, limit, maxBytes int) ([]*fsmpb.Step, uint64) {
	var out []*fsmpb.Step
	size := 0
	for st := range s.tx.SessionSteps(sessionID, after+1) {
		if len(out) >= limit || (len(out) > 0 && size+proto.Size(st) > maxBytes) {
			return out, out[len(out)-1].Number
		}
		size += proto.Size(st)
		out = append(out, st)
	}
	return out, 0
}

// SessionsPage returns up to limit sessions with an id above after, in id
// order, and the id to read on from ("" when none is left).
func (s *State) SessionsPage(after string, limit int) ([]*fsmpb.Session, string) {
	var out []*fsmpb.Session
	for sess := range s.tx.SessionsFrom(after) {
		if sess.Id == after || hidden(sess) {
			continue
		}
		if len(out) >= limit {
			return out, out[len(out)-1].Id
		}
		out = append(out, sess)
	}
	return out, ""
}

// ListSessions returns a page of the visible sessions that pass f, in the
// order asked, strictly after the position after (nil: from the start),
// and the position to read on from (nil: none is left). It walks one list
// index range and examines at most store.MaxListScan entries a page.
func (s *State) ListSessions(f store.SessionFilter, order store.ListOrder, desc bool, after *store.ListPosition, limit int) ([]*fsmpb.Session, *store.ListPosition) {
	return s.tx.ListSessions(f, order, desc, after, limit)
}
