package main

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/dexhq/dex/cluster"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// lateProposer hands the leader-only services a node that is opened after
// they are built. Until then a proposal fails and the leadership loop retries.
type lateProposer struct {
	node atomic.Pointer[cluster.Node]
}

var errNotOpen = errors.New("the node is still opening")

func (l *lateProposer) set(n *cluster.Node) { l.node.Store(n) }

func (l *lateProposer) Propose(ctx context.Context, cmd *fsmpb.Command) (*fsm.Result, error) {
	n := l.node.Load()
	if n == nil {
		return nil, errNotOpen
	}
	return n.Propose(ctx, cmd)
}

// notOpen is the empty state the services read before the node is open.
var notOpen = fsm.New(fsm.Options{})

func (l *lateProposer) State() *fsm.State {
	if n := l.node.Load(); n != nil {
		return n.State()
	}
	return notOpen.State()
}
