package fsm

import (
	"fmt"

	memdb "github.com/hashicorp/go-memdb"
	"google.golang.org/protobuf/proto"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// applier applies one command inside one write transaction. Objects read from
// the store are cloned before they change: readers may still hold them.
type applier struct {
	tx    *memdb.Txn
	now   int64
	index uint64
	m     *fsmpb.ClusterMeta
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
	raw, err := a.tx.First(tableMeta, indexID, metaID)
	if err != nil {
		panic(fmt.Sprintf("fsm: read meta: %v", err))
	}
	if raw == nil {
		a.m = &fsmpb.ClusterMeta{Id: metaID}
	} else {
		a.m = proto.Clone(raw.(*fsmpb.ClusterMeta)).(*fsmpb.ClusterMeta)
	}
	return a.m
}

func (a *applier) putMeta(m *fsmpb.ClusterMeta) { a.insert(tableMeta, m) }

func (a *applier) insert(table string, obj any) {
	if err := a.tx.Insert(table, obj); err != nil {
		panic(fmt.Sprintf("fsm: insert %s: %v", table, err)) // only on a schema bug
	}
}

func (a *applier) session(id string) (*fsmpb.Session, *Rejection) {
	if id == "" {
		return nil, reject(CodeInvalid, "session id is required")
	}
	s := a.sessionRow(id)
	if s == nil || deleted(s) {
		return nil, reject(CodeNotFound, "session %q not found", id)
	}
	return s, nil
}

func (a *applier) putSession(s *fsmpb.Session) {
	s.UpdatedAtMs = a.now
	a.insert(tableSessions, s)
	a.touched.session(s.Id)
}

func (a *applier) step(id string) (*fsmpb.Step, *Rejection) {
	if id == "" {
		return nil, reject(CodeInvalid, "step id is required")
	}
	raw, err := a.tx.First(tableSteps, indexID, id)
	if err != nil {
		panic(err)
	}
	if raw == nil {
		return nil, reject(CodeNotFound, "step %q not found", id)
	}
	// The Steps of a deleted session wait for the purge: nothing acts on them.
	if s := a.storedSession(raw.(*fsmpb.Step).SessionId); s != nil && deleted(s) {
		return nil, reject(CodeNotFound, "step %q not found: its session was deleted", id)
	}
	return proto.Clone(raw.(*fsmpb.Step)).(*fsmpb.Step), nil
}

func (a *applier) putStep(st *fsmpb.Step) {
	a.insert(tableSteps, st)
	a.touched.step(st.Id)
}
