package fsm

import (
	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/fsm/store"
)

// applier applies one command inside one write transaction. Objects read from
// the store are cloned before they change: readers may still hold them.
type applier struct {
	tx    *store.Txn
	now   int64
	index uint64
	// n is the command's place (from 1) in a Batch entry; 0 for an entry
	// of its own.
	n int
	m *fsmpb.ClusterMeta
	// touched: the Steps and sessions this command wrote, for OnApplied.
	touched touched
	// held is a session a caller holds while it acts on another (a parent
	// resuming its child): what the other tells it goes to this copy.
	held *fsmpb.Session
}

func (a *applier) meta() *fsmpb.ClusterMeta {
	if a.m != nil {
		return a.m
	}
	if m := a.tx.StoredMeta(); m == nil {
		a.m = &fsmpb.ClusterMeta{Id: store.MetaID}
	} else {
		a.m = m.CloneVT()
	}
	return a.m
}

func (a *applier) putMeta(m *fsmpb.ClusterMeta) { a.insert(store.TableMeta, m) }

func (a *applier) insert(table string, obj any) { a.tx.Put(table, obj) }

func (a *applier) session(id string) (*fsmpb.Session, *Rejection) {
	if id == "" {
		return nil, reject(CodeInvalid, "session id is required")
	}
	s := a.sessionRow(id)
	if s == nil || hidden(s) {
		return nil, reject(CodeNotFound, "session %q not found", id)
	}
	return s, nil
}

func (a *applier) putSession(s *fsmpb.Session) {
	a.settleClose(s)
	s.UpdatedAtMs = a.now
	s.FoldDueThrough = foldDueThrough(s, a.meta().GetKeepTurnSteps())
	a.insert(store.TableSessions, s)
	a.touched.session(s.Id)
}

func (a *applier) step(id string) (*fsmpb.Step, *Rejection) {
	if id == "" {
		return nil, reject(CodeInvalid, "step id is required")
	}
	st := a.tx.Step(id)
	if st == nil {
		return nil, reject(CodeNotFound, "step %q not found", id)
	}
	// The Steps of a deleted session wait for the purge: nothing acts on them.
	if s := a.storedSession(st.SessionId); s != nil {
		switch {
		case deleted(s):
			return nil, reject(CodeNotFound, "step %q not found: its session was deleted", id)
		case importing(s):
			return nil, reject(CodeNotFound, "step %q not found: its session is being imported", id)
		}
	}
	return st.CloneVT(), nil
}

func (a *applier) putStep(st *fsmpb.Step) {
	a.insert(store.TableSteps, st)
	a.touched.step(st.Id)
}
