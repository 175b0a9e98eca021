package dispatch

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// Raft is the cluster node as the leader's proposer uses it (cluster.Node).
type Raft interface {
	// ProposeAll hands cmds to raft one behind the other and reports, in
	// order and from another goroutine, what became of each. An error: none
	// was handed over.
	ProposeAll(ctx context.Context, cmds []*fsmpb.Command, answered func(i int, res *fsm.Result, err error)) error
}

// Predictor guesses the Steps a command will leave ready (fsm.FSM).
type Predictor interface {
	Predict(cmd *fsmpb.Command, inFlight ...*fsmpb.Command) []*fsmpb.Step
}

// Pairer pairs the Steps a command will leave ready with waiting polls
// (the Dispatcher): the pipeline proposes the StartAttempts it returns
// right behind the command.
type Pairer interface {
	// Waiting reports whether a poll waits, so a prediction is worth making.
	Waiting() bool
	// PairReady returns the commands to propose behind the command, with a
	// function that receives, in order, what became of each once it is
	// applied or has failed.
	PairReady(ready []*fsmpb.Step) (next []*fsmpb.Command, done func([]*fsm.Result, []error))
}

// Pipeline is the leader's proposer: every leader proposal goes through it
// to raft. When a poll waits, it predicts (fsm.Predict) the Steps a command
// will queue, over the commands still in flight, and proposes the
// StartAttempts the Dispatcher pairs with them right behind the command, so
// raft commits both in one round and a waiting Worker holds its task one
// commit after its Step was queued instead of two. The prediction runs here,
// under the pipeline's own lock, never under the cluster's.
type Pipeline struct {
	r    Raft
	pred Predictor
	now  func() time.Time
	pair atomic.Pointer[pairerBox]

	// mu hands one proposal at a time to raft, so the in-flight list is in
	// raft's order; a prediction is made under it.
	mu       sync.Mutex
	inFlight inFlight
}

type pairerBox struct{ p Pairer }

// NewPipeline returns the leader's proposer over r; now stamps a command
// proposed without a time (time.Now when nil). It predicts nothing until a
// Pairer is set (Pair).
func NewPipeline(r Raft, pred Predictor, now func() time.Time) *Pipeline {
	if now == nil {
		now = time.Now
	}
	return &Pipeline{r: r, pred: pred, now: now}
}

// Pair sets the dispatcher whose waiting polls the predicted Steps are
// paired with (nil: none).
func (p *Pipeline) Pair(d Pairer) {
	if d == nil {
		p.pair.Store(nil)
		return
	}
	p.pair.Store(&pairerBox{d})
}

// Propose commits a command through raft and returns the state machine's
// result. A command without a time gets the leader's clock.
func (p *Pipeline) Propose(ctx context.Context, cmd *fsmpb.Command) (*fsm.Result, error) {
	if cmd.GetNowMs() == 0 {
		// Stamped here: the prediction reads the command's time.
		cmd = cmd.CloneVT()
		cmd.NowMs = p.now().UnixMilli()
	}
	type answer struct {
		res *fsm.Result
		err error
	}
	ch := make(chan answer, 1)

	p.mu.Lock()
	next, done := p.pairLocked(cmd)
	cmds := append([]*fsmpb.Command{cmd}, next...)
	seqs := p.inFlight.add(cmds...)
	var results []*fsm.Result
	var errs []error
	if len(next) > 0 {
		results, errs = make([]*fsm.Result, len(next)), make([]error, len(next))
	}
	err := p.r.ProposeAll(ctx, cmds, func(i int, res *fsm.Result, err error) {
		p.inFlight.done(seqs[i])
		if i == 0 {
			ch <- answer{res, err}
			return
		}
		results[i-1], errs[i-1] = res, err
		if i == len(cmds)-1 {
			done(results, errs)
		}
	})
	p.mu.Unlock()
	if err != nil {
		for _, s := range seqs {
			p.inFlight.done(s)
		}
		if len(next) > 0 {
			for i := range errs {
				errs[i] = err
			}
			done(results, errs)
		}
		return nil, err
	}
	select {
	case a := <-ch:
		return a.res, a.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// pairLocked asks the dispatcher, if a poll waits, for the commands to
// propose right behind cmd. p.mu is held.
func (p *Pipeline) pairLocked(cmd *fsmpb.Command) ([]*fsmpb.Command, func([]*fsm.Result, []error)) {
	box := p.pair.Load()
	if box == nil || !fsm.MayQueueSteps(cmd) || !box.p.Waiting() {
		return nil, nil
	}
	ready := p.pred.Predict(cmd, p.inFlight.list()...)
	if len(ready) == 0 {
		return nil, nil
	}
	return box.p.PairReady(ready)
}

// maxPredictOver bounds the commands in flight a prediction applies first.
// More in flight means a busy leader, where a poll seldom waits for long;
// the prediction is then made over the applied state alone.
const maxPredictOver = 16

// inFlight keeps the commands the leader proposed and has not seen
// answered, in the order raft got them, so a prediction can apply them
// first.
type inFlight struct {
	mu   sync.Mutex
	seq  uint64
	cmds []proposed // oldest first
}

type proposed struct {
	seq uint64
	cmd *fsmpb.Command
}

// add records cmds as proposed and returns their sequence numbers.
func (f *inFlight) add(cmds ...*fsmpb.Command) []uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	seqs := make([]uint64, len(cmds))
	for i, c := range cmds {
		f.seq++
		seqs[i] = f.seq
		f.cmds = append(f.cmds, proposed{seq: f.seq, cmd: c})
	}
	return seqs
}

// list returns the commands in flight for a prediction (nil past
// maxPredictOver).
func (f *inFlight) list() []*fsmpb.Command {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.cmds) > maxPredictOver {
		return nil
	}
	out := make([]*fsmpb.Command, len(f.cmds))
	for i, p := range f.cmds {
		out[i] = p.cmd
	}
	return out
}

// done forgets a proposal once raft answered it (applied or failed).
func (f *inFlight) done(seq uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, p := range f.cmds {
		if p.seq == seq {
			f.cmds = append(f.cmds[:i], f.cmds[i+1:]...)
			return
		}
	}
}

// count is how many proposals raft has not answered.
func (f *inFlight) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.cmds)
}
