package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// leaderLoop follows raft's leadership notifications: on gaining leadership
// it establishes it (barrier, epoch bump, own addresses, leader services);
// on losing it, it revokes the services at once.
func (n *Node) leaderLoop() {
	defer n.wg.Done()
	var (
		cancel context.CancelFunc
		done   chan struct{}
	)
	stop := func() {
		if cancel != nil {
			cancel()
			<-done
			cancel, done = nil, nil
		}
		n.revoke()
	}
	start := func() {
		ctx, c := context.WithCancel(context.Background())
		cancel, done = c, make(chan struct{})
		d := done
		go func() {
			defer close(d)
			n.establish(ctx)
		}()
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	// handedOver: Handover stopped the services for good; this node hands
	// leadership to another voter and establishes nothing any more.
	handedOver := false
	for {
		select {
		case <-n.shutdownCh:
			stop()
			return
		case req := <-n.handoverCh:
			handedOver = true
			stop()
			close(req)
		case req := <-n.restoreCh:
			// No leader service may act on the old state once the new one is
			// in: stop them, restore, and establish leadership again.
			stop()
			req.err = n.restore(req)
			if !handedOver && n.raft.State() == raft.Leader {
				start()
			}
			close(req.done)
		case leader := <-n.notifyCh:
			// A new term even if we never saw the loss in between.
			stop()
			if leader && !handedOver {
				start()
			}
		case <-tick.C:
			// The notification channel keeps only the latest value: catch a
			// lost-and-regained leadership whose establishment finished
			// for an older term.
			if handedOver || n.raft.State() != raft.Leader {
				continue
			}
			n.mu.Lock()
			stale := n.leaderTerm != 0 && n.leaderTerm != n.raft.CurrentTerm()
			n.mu.Unlock()
			running := false
			if done != nil {
				select {
				case <-done:
				default:
					running = true
				}
			}
			if stale && !running {
				stop()
				start()
			}
		}
	}
}

// establish runs until leadership of this term is established or ctx ends.
func (n *Node) establish(ctx context.Context) {
	term := n.raft.CurrentTerm()
	n.log.Info("leadership gained; establishing", zap.Uint64("term", term))
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff(attempt)):
			}
		}
		if ctx.Err() != nil || n.raft.State() != raft.Leader {
			return
		}
		epoch, err := n.establishOnce(ctx)
		if err != nil {
			n.mu.Lock()
			n.estErr = err.Error()
			n.mu.Unlock()
			n.log.Warn("establishing leadership failed; retrying", zap.Uint64("term", term), zap.Error(err))
			continue
		}
		n.mu.Lock()
		n.leaderTerm, n.leaderEpoch, n.estErr = term, epoch, ""
		draining := n.draining
		n.mu.Unlock()
		n.log.Info("leadership established", zap.Uint64("term", term), zap.Uint64("epoch", epoch))
		n.fireNow() // readiness turns 200 now, not at the next readiness tick
		if draining {
			// Drain ran before the services started: they take no new work.
			n.drainServices()
		}
		return
	}
}

func backoff(attempt int) time.Duration {
	d := 100 * time.Millisecond << min(attempt, 5)
	return min(d, 2*time.Second)
}

func (n *Node) establishOnce(ctx context.Context) (uint64, error) {
	// Everything committed by earlier leaders is applied before this one acts.
	if err := n.raft.Barrier(10 * time.Second).Error(); err != nil {
		return 0, fmt.Errorf("barrier: %w", err)
	}
	res, err := n.Propose(ctx, &fsmpb.Command{Body: &fsmpb.Command_BumpEpoch{BumpEpoch: &fsmpb.BumpEpoch{NodeId: n.cfg.ID}}})
	if err != nil {
		return 0, fmt.Errorf("bump epoch: %w", err)
	}
	if res.Err != nil {
		return 0, fmt.Errorf("bump epoch rejected: %v", res.Err)
	}
	epoch := res.Epoch
	if n.cfg.partition == 0 && !proto.Equal(n.nodeInfo(n.cfg.ID), n.Info()) {
		// The nodes table is partition 0's; the other partitions read it.
		res, err := n.Propose(ctx, &fsmpb.Command{Body: &fsmpb.Command_SetNode{SetNode: &fsmpb.SetNode{Node: n.Info()}}})
		if err != nil {
			return 0, fmt.Errorf("record own addresses: %w", err)
		}
		if res.Err != nil {
			return 0, fmt.Errorf("record own addresses rejected: %v", res.Err)
		}
	}
	n.mu.Lock()
	services := append([]LeaderService(nil), n.services...)
	n.mu.Unlock()
	for i, s := range services {
		if err := s.EstablishLeadership(ctx, epoch); err != nil {
			for j := i; j >= 0; j-- {
				services[j].RevokeLeadership()
			}
			return 0, fmt.Errorf("start leader service %T: %w", s, err)
		}
	}
	return epoch, nil
}

// revoke stops the leader services and forgets the established term.
func (n *Node) revoke() {
	n.mu.Lock()
	was := n.leaderTerm
	n.leaderTerm, n.leaderEpoch, n.estErr = 0, 0, ""
	services := append([]LeaderService(nil), n.services...)
	n.mu.Unlock()
	if was == 0 {
		return
	}
	for i := len(services) - 1; i >= 0; i-- {
		services[i].RevokeLeadership()
	}
	n.log.Info("leadership revoked", zap.Uint64("term", was))
}

// Epoch is the dispatch epoch this node established as leader (0 when it is
// not an established leader).
func (n *Node) Epoch() uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.leaderEpoch
}

// Ready reports whether this node may serve leader-only work: it leads, its
// leadership of this term is established (barrier, epoch bump, services),
// its applied index keeps up with its commit index, and it is not draining.
// Otherwise the reason says why not.
func (n *Node) Ready() (bool, string) { return n.readiness(true) }

// MemberReady reports whether this node is a healthy member that can serve
// a call here or forward it to the leader: the leader when it is Ready; a
// follower when it knows its leader, heard from it within memberContact,
// and its applied index keeps up with its commit index.
func (n *Node) MemberReady() (bool, string) {
	if n.IsLeader() {
		return n.Ready()
	}
	if err := n.fsm.Halted(); err != nil {
		return false, "state machine halted: " + err.Error()
	}
	if n.Leader() == nil {
		return false, fmt.Sprintf("no leader is known (this node is a %s)", StateName(n.raft.State()))
	}
	if since := time.Since(n.raft.LastContact()); since > memberContact {
		return false, fmt.Sprintf("no word from the leader for %s", since.Truncate(time.Millisecond))
	}
	n.mu.Lock()
	lastAdvance := n.lastAdvance
	n.mu.Unlock()
	commit, applied, stalled := n.applyStalled(lastAdvance)
	if applied+memberLag < commit || stalled {
		return false, fmt.Sprintf("catching up: applied index %d, commit index %d", applied, commit)
	}
	return true, ""
}

// applyStalled reports the commit and applied indexes, and whether the
// applied index is behind and has not advanced since lastAdvance for
// applyStall.
func (n *Node) applyStalled(lastAdvance time.Time) (commit, applied uint64, stalled bool) {
	commit, applied = n.raft.CommitIndex(), n.raft.AppliedIndex()
	return commit, applied, applied < commit && time.Since(lastAdvance) > applyStall
}

// memberContact is how long a follower may go without a word from its
// leader (a heartbeat every 100 ms or so) and still count as a member that
// keeps up.
const memberContact = 3 * time.Second

// memberLag is how many committed entries a ready follower may have left
// to apply: more means it is catching up (a restart, a snapshot install).
const memberLag = 1024

// VerifyLeader confirms with a quorum that this node still leads. A leader
// that was paused (SIGSTOP) believes it leads until it hears otherwise; this
// round trip tells it at once.
func (n *Node) VerifyLeader(timeout time.Duration) error {
	f := n.raft.VerifyLeader()
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-time.After(timeout):
		return fmt.Errorf("no quorum confirmed the leadership within %s", timeout)
	}
}

// ServesAttempts reports whether this node may serve the Worker calls of
// attempts already running (claim, heartbeat, complete, fail): it is Ready,
// or it is draining but otherwise ready, so those attempts can finish on
// the node that holds their deadlines before it hands leadership over.
func (n *Node) ServesAttempts() (bool, string) { return n.readiness(false) }

func (n *Node) readiness(drainCounts bool) (bool, string) {
	if err := n.fsm.Halted(); err != nil {
		return false, "state machine halted: " + err.Error()
	}
	state := n.raft.State()
	if state != raft.Leader {
		if l := n.Leader(); l != nil {
			return false, fmt.Sprintf("not the leader (this node is a %s; the leader is %s)", StateName(state), l.Id)
		}
		return false, fmt.Sprintf("not the leader (this node is a %s; no leader is known)", StateName(state))
	}
	term := n.raft.CurrentTerm()
	n.mu.Lock()
	established, estErr, lastAdvance := n.leaderTerm, n.estErr, n.lastAdvance
	draining, handedOver := n.draining, n.handedOver
	n.mu.Unlock()
	if handedOver {
		return false, "draining: handing leadership over to another node"
	}
	if draining && drainCounts {
		return false, "draining: this node is shutting down; it takes no new work and lets running attempts finish"
	}
	if established != term {
		msg := fmt.Sprintf("leader of term %d, but leadership is not established yet (barrier, epoch bump)", term)
		if estErr != "" {
			msg += ": " + estErr
		}
		return false, msg
	}
	if commit, applied, stalled := n.applyStalled(lastAdvance); stalled {
		return false, fmt.Sprintf("applied index %d is behind commit index %d and has not advanced for %s", applied, commit, time.Since(lastAdvance).Truncate(time.Second))
	}
	n.mu.Lock()
	gates := n.readyGates
	n.mu.Unlock()
	for _, gate := range gates {
		if ok, reason := gate(); !ok {
			return false, reason
		}
	}
	return true, ""
}

// AddReadyGate adds a condition a leader must also meet to be ready (for
// example: the bootstrap token committed, so the first calls with it pass).
func (n *Node) AddReadyGate(gate func() (ready bool, reason string)) {
	n.mu.Lock()
	n.readyGates = append(n.readyGates, gate)
	n.mu.Unlock()
}

// OnReadyChange registers a hook called with the current readiness now and
// on every change after.
func (n *Node) OnReadyChange(f func(ready bool, reason string)) {
	ready, reason := n.Ready()
	n.mu.Lock()
	n.readyHooks = append(n.readyHooks, f)
	n.mu.Unlock()
	f(ready, reason)
}

func (n *Node) readinessLoop() {
	defer n.wg.Done()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-n.shutdownCh:
			n.fireMu.Lock()
			n.fire(false, false, "shutting down")
			n.fireMu.Unlock()
			return
		case <-tick.C:
		}
		commit, applied := n.raft.CommitIndex(), n.raft.AppliedIndex()
		n.mu.Lock()
		if applied != n.lastApplied || applied >= commit {
			n.lastApplied = applied
			n.lastAdvance = time.Now()
		}
		n.mu.Unlock()
		n.fireNow()
	}
}

// fireNow tells the hooks about the current readiness if it changed. Reading
// and telling are one step, so hooks never see an older state last.
func (n *Node) fireNow() {
	n.fireMu.Lock()
	defer n.fireMu.Unlock()
	ready, reason := n.Ready()
	serves, _ := n.ServesAttempts()
	n.fire(ready, serves, reason)
}

// fire calls the readiness hooks when readiness or ServesAttempts changed
// (hooks read ServesAttempts themselves).
func (n *Node) fire(ready, serves bool, reason string) {
	n.mu.Lock()
	changed := ready != n.lastReady || serves != n.lastServes
	n.lastReady, n.lastServes, n.lastReason = ready, serves, reason
	hooks := append([]func(bool, string){}, n.readyHooks...)
	n.mu.Unlock()
	if !changed {
		return
	}
	if ready {
		n.log.Info("node is ready")
	} else {
		n.log.Info("node is not ready", zap.String("reason", reason), zap.Bool("serves_running_attempts", serves))
	}
	for _, h := range hooks {
		h(ready, reason)
	}
}
