package dispatch

import (
	"go.uber.org/zap"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// A Step queued while a poll waits for it would cost the Worker two commits
// in a row: the command that queues it, then its StartAttempt once the
// broker sees it. Instead the leader's Pipeline predicts, before it
// proposes a command, the Steps it will queue (fsm.Predict), and the
// dispatcher pairs each with a waiting poll that takes it (PairReady); the
// Pipeline proposes its StartAttempt right behind the command, and raft
// commits both in one round. The poll is woken
// with an offer and waits for that StartAttempt; a refused one (the guess
// was wrong) puts the poll back to picking as usual.

// offer is a pipelined StartAttempt on its way to a woken poll.
type offer struct {
	tasks chan []*dexv1.Task // what the poll hands out (empty: refused)
}

// Waiting reports whether a poll waits for a Step (Pairer).
func (d *Dispatcher) Waiting() bool {
	r, err := d.begin()
	if err != nil {
		return false
	}
	defer r.leave()
	return r.b.waiting()
}

// PairReady pairs the Steps a command will leave ready with waiting polls
// and returns their StartAttempts, to be proposed right behind the command
// (Pairer). done hands each poll its task once its StartAttempt
// is applied; until it ran, Stop waits (raft answers every proposal once it
// commits or this node stops leading).
func (d *Dispatcher) PairReady(ready []*fsmpb.Step) ([]*fsmpb.Command, func([]*fsm.Result, []error)) {
	r, err := d.begin()
	if err != nil {
		return nil, nil
	}
	var steps []*fsmpb.Step
	var offers []*offer
	var cmds []*fsmpb.Command
	now := d.cfg.Now().UnixMilli()
	for _, s := range ready {
		worker, off := r.b.offer(s, now)
		if off == nil {
			continue
		}
		steps, offers = append(steps, s), append(offers, off)
		cmds = append(cmds, &fsmpb.Command{NowMs: now, Body: &fsmpb.Command_StartAttempt{StartAttempt: &fsmpb.StartAttempt{
			StepId: s.Id, Attempt: uint32(len(s.Attempts)) + 1, WorkerId: worker, Epoch: r.epoch,
			DefaultRunTimeoutMs: uint32(d.deadlines.DefaultRunTimeout().Milliseconds()),
		}}})
	}
	if len(cmds) == 0 {
		r.leave()
		return nil, nil
	}
	return cmds, func(results []*fsm.Result, errs []error) {
		defer r.leave()
		st := d.src.State()
		for i, s := range steps {
			var tasks []*dexv1.Task
			switch res := results[i]; {
			case errs[i] != nil:
				d.log.Warn("proposing a pipelined StartAttempt failed", zap.String("step", s.Id), zap.Error(errs[i]))
			case res.Err != nil:
				d.log.Debug("pipelined StartAttempt refused", zap.String("step", s.Id), zap.String("reason", res.Err.Error()))
			default:
				r.b.markServed(s.SessionId)
				d.deadlines.Arm(s.Id, res.Attempt.N)
				tasks = []*dexv1.Task{d.handOver(st, s, res.Attempt, r.epoch)}
			}
			d.done(r, s.Id)
			offers[i].tasks <- tasks
		}
	}
}

// waiting reports whether any poll waits.
func (b *Broker) waiting() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.nwaiting > 0 && !b.stopped && !b.deposed
}

// offer picks a waiting poll that takes s and need not leave it to another
// Worker, wakes it with an offer and puts s in flight. It returns the
// poll's Worker and the offer, or nil when no poll fits: s is then handed
// out as usual once it is applied.
func (b *Broker) offer(s *fsmpb.Step, now int64) (string, *offer) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped || b.deposed || b.inflight[s.Id] || b.ready[s.Id] != nil || b.delayed[dueKey{dueReady, s.Id}] != nil {
		return "", nil // the broker knows the Step already: it goes the usual way
	}
	k, ok := keyOf(s)
	if !ok {
		return "", nil
	}
	var p *providerState
	if k.model && len(b.providers) > 0 {
		// A session created by the command being proposed is not in the
		// state yet: it will have its agent's provider.
		provider := b.agentProviders[s.Agent]
		if sess := b.src.State().Session(s.SessionId); sess != nil {
			provider = sess.Provider
		}
		p = b.provider(provider)
		if blocked, _ := p.blocked(now); blocked {
			return "", nil
		}
	}
	for _, ws := range []map[*waiter]struct{}{b.queues[k].waitersOrNil(), b.wildOf(k)} {
		for w := range ws {
			if w.worker == "" || b.avoids(w.worker, s) {
				continue
			}
			w.offer = &offer{tasks: make(chan []*dexv1.Task, 1)}
			b.wakeLocked(w)
			b.inflight[s.Id] = true
			b.took(p, s.Id, now)
			return w.worker, w.offer
		}
	}
	return "", nil
}

// markServed puts a session that was handed a Step behind every other in the
// dispatch order and charges its fairness key, as takeFor does when it picks
// one.
func (b *Broker) markServed(session string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.serve(session)
	o := b.orderOf(session)
	b.order.charge(o.fairness, o.weight)
}

// settle ends a poll's wait however it ended and returns the offer it was
// woken with, if any: the poll must wait for that StartAttempt's outcome.
func (b *Broker) settle(w *waiter) *offer {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !w.woken {
		w.woken = true
		b.unwaitLocked(w)
	}
	return w.offer
}
