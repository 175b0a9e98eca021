package fsm

import (
	"github.com/dexhq/dex/fsm/fsmpb"
)

// apply runs one command through the command table (commands.go).
func (a *applier) apply(cmd *fsmpb.Command) *Result {
	c := commandOf(cmd)
	if c == nil {
		// Unreachable: ApplyEntry handles a nil body; every oneof case is in
		// the table.
		return &Result{Err: reject(CodeInvalid, "unhandled command %T", cmd.Body)}
	}
	return c.apply(a, cmd)
}

func rejected(r *Rejection) *Result { return &Result{Err: r} }

// checkEpoch fences commands proposed by a lease holder (the table's fenced
// ones): one from an older epoch was proposed by a deposed leader and must
// change nothing.
func (a *applier) checkEpoch(epoch uint64) *Rejection {
	if cur := a.meta().Epoch; epoch != cur {
		return reject(CodeFailedPrecondition, "stale dispatch epoch %d: the current epoch is %d", epoch, cur)
	}
	return nil
}

func (a *applier) bumpEpoch(c *fsmpb.BumpEpoch) *Result {
	if c.NodeId == "" {
		return rejected(reject(CodeInvalid, "node id is required"))
	}
	m := a.meta()
	m.Epoch++
	m.EpochHolder = c.NodeId
	return &Result{Epoch: m.Epoch}
}
