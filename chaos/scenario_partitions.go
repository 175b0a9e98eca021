package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/wirerules"
	"github.com/dexhq/dex/chaos/harness"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// The matrix on clusters of several partitions (dexchaos matrix
// --partitions N, docs/design/partitions.md). Every session of a cell
// lives in one partition, the cell's home, so the rows play as on one
// raft group; the faults strike that partition's leader. The takeover
// columns also keep background sessions of the partitions the struck
// node does not lead running turns through the kill, on a Worker of their
// own, and check that none of their turns fails.

// homePartition is the partition of a cell's sessions: the cells spread
// over the partitions by name.
func homePartition(c Cell, partitions int) int {
	return wirerules.PartitionOf(c.Name(), partitions)
}

// idIn is base, or with several partitions base and the first suffix
// "-N" that places it in partition k.
func idIn(base string, k, partitions int) string {
	if partitions <= 1 {
		return base
	}
	for i := 0; ; i++ {
		if id := fmt.Sprintf("%s-%d", base, i); wirerules.PartitionOf(id, partitions) == k {
			return id
		}
	}
}

// partitioned reports whether the cell runs on several partitions.
func (e *cellEnv) partitioned() bool { return e.partitions > 1 }

// homeStatus is the cell's partition in a Status answer.
func (e *cellEnv) homeStatus(st *dexv1.StatusResponse) (*dexv1.PartitionStatus, error) {
	if e.home >= len(st.Partitions) {
		return nil, fmt.Errorf("%s lists %d partitions; the cell's sessions live in partition %d", st.AnsweredBy, len(st.Partitions), e.home)
	}
	return st.Partitions[e.home], nil
}

// waitLeaderOther waits until a running node other than not names a
// running leader of the cell's partition that is not not, and returns it.
func (e *cellEnv) waitLeaderOther(not *harness.Node) (*harness.Node, error) {
	deadline := time.Now().Add(waitShort)
	last := "no node answered"
	for {
		for _, n := range e.cluster.Nodes {
			if n == not || !n.Running() {
				continue
			}
			ctx, cancel := e.timeout(3 * time.Second)
			ids, err := e.cluster.PartitionLeaders(ctx, n)
			cancel()
			if err != nil {
				last = err.Error()
				continue
			}
			if l := e.cluster.Node(ids[e.home]); l != nil && l != not && l.Running() {
				return l, nil
			}
			last = fmt.Sprintf("%s sees leader %q", n.ID, ids[e.home])
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no node but %s took the lead of partition %d within %s: %s", not.ID, e.home, waitShort, last)
		}
		if err := e.sleep(20 * time.Millisecond); err != nil {
			return nil, err
		}
	}
}

// waitDeposed waits until the woken node old names another node as the
// leader of the cell's partition.
func (e *cellEnv) waitDeposed(old *harness.Node) error {
	deadline := time.Now().Add(waitShort)
	last := "no answer"
	for {
		ctx, cancel := e.timeout(3 * time.Second)
		ids, err := e.cluster.PartitionLeaders(ctx, old)
		cancel()
		if err == nil {
			if ids[e.home] != "" && ids[e.home] != old.ID {
				return nil
			}
			last = fmt.Sprintf("it sees leader %q", ids[e.home])
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("leader pause: the woken %s did not step down in partition %d within %s: %s", old.ID, e.home, waitShort, last)
		}
		if err := e.sleep(50 * time.Millisecond); err != nil {
			return err
		}
	}
}

// takeoverPartition SIGKILLs the leader of the cell's partition while
// background sessions of the partitions it does not lead run turns, and
// checks that they all completed without a failure.
func (e *cellEnv) takeoverPartition() error {
	old, ids, err := e.strikeTarget()
	if err != nil {
		return err
	}
	var others []int
	for k, id := range ids {
		if id != old.ID {
			others = append(others, k)
		}
	}
	bg, err := e.startBackground(others)
	if err != nil {
		return err
	}
	t0 := time.Now()
	old.Kill()
	next, err := e.waitLeaderOther(old)
	if err != nil {
		bg.halt()
		return fmt.Errorf("takeover: %w", err)
	}
	took := time.Since(t0)
	e.takeovers = append(e.takeovers, took)
	e.killed = append(e.killed, old)
	e.notef("SIGKILL %s, the leader of partition %d (leaders %v); %s leads it after %s", old.ID, e.home, ids, next.ID, took.Round(time.Millisecond))
	return bg.finish(ids, old.ID)
}

// strikeTarget waits until the cluster serves and the leader of the cell's
// partition does not lead every partition, and returns it and the leader
// of each partition. A cell's first fault finds the leaderships spread
// (waitStart); after a takeover the balancer may still keep them on one
// node for a while (it passes over a node that was down for 30 s).
func (e *cellEnv) strikeTarget() (*harness.Node, []string, error) {
	deadline := time.Now().Add(waitLong)
	for {
		old, err := e.waitReady()
		if err != nil {
			return nil, nil, err
		}
		ctx, cancel := e.timeout(waitShort)
		ids, err := e.cluster.PartitionLeaders(ctx, old)
		cancel()
		if err != nil {
			return nil, nil, err
		}
		if slices.ContainsFunc(ids, func(id string) bool { return id != old.ID }) {
			return old, ids, nil
		}
		if time.Now().After(deadline) {
			return nil, nil, fmt.Errorf("takeover: %s still leads every partition (%v) after %s; no session of another partition can run through its kill", old.ID, ids, waitLong)
		}
		if err := e.sleep(200 * time.Millisecond); err != nil {
			return nil, nil, err
		}
	}
}

// ---- Background sessions

// bgAgent is the agent of the background sessions: only the background
// Worker runs their model, and it serves no other session.
const bgAgent = "background"

// bgScript: every background turn is one RunModel that takes a while, so
// a turn is always running.
const bgScript = `{"turns": [], "default": [{"text": "a background answer", "delay_ms": 500}]}`

// bgPerPartition background sessions run in each partition the struck
// node does not lead.
const bgPerPartition = 2

// bgRun is the background load of one takeover.
type bgRun struct {
	e        *cellEnv
	sessions []bgSession
	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
}

type bgSession struct {
	id        string
	partition int
	turns     int   // turns sent
	err       error // why its turns did not go on
}

// startBackground creates the background sessions in the partitions and
// returns once each is running its first turn; each then starts a turn
// after the other until the run is finished.
func (e *cellEnv) startBackground(partitions []int) (*bgRun, error) {
	if err := e.startBackgroundWorker(); err != nil {
		return nil, err
	}
	e.bgStrikes++
	b := &bgRun{e: e, stop: make(chan struct{})}
	for _, k := range partitions {
		for i := 1; i <= bgPerPartition; i++ {
			id := idIn(fmt.Sprintf("bg%d-p%d-%d-%d", e.bgStrikes, k, i, time.Now().UnixNano()%1e9), k, e.partitions)
			b.sessions = append(b.sessions, bgSession{id: id, partition: k})
		}
	}
	for i := range b.sessions {
		s := &b.sessions[i]
		err := e.retry("create background session "+s.id, func(ctx context.Context) error {
			_, err := e.cl.CreateSession(ctx, &dexv1.CreateSessionRequest{SessionId: s.id, Message: "background turn 1", Agent: bgAgent})
			if status.Code(err) == codes.AlreadyExists {
				return nil // our own earlier try
			}
			return err
		})
		if err != nil {
			b.halt()
			return nil, err
		}
		s.turns = 1
		b.wg.Add(1)
		go func() { defer b.wg.Done(); s.err = b.keepRunning(s) }()
	}
	var ids []string
	for _, s := range b.sessions {
		ids = append(ids, s.id)
		if err := e.waitBackgroundLedger(s.id); err != nil {
			b.halt()
			return nil, err
		}
	}
	e.notef("background sessions running in partitions %v: %s", partitions, strings.Join(ids, " "))
	return b, nil
}

// startBackgroundWorker starts the Worker of the background sessions once
// per cell: it runs only their agent's model, with the cell's flags (the
// tools' policies must agree with the cell's Workers') and room for all
// of them at once.
func (e *cellEnv) startBackgroundWorker() error {
	if e.bgWorker != nil {
		return nil
	}
	script := filepath.Join(e.dir, "background-script.json")
	if err := os.WriteFile(script, []byte(bgScript), 0o644); err != nil {
		return err
	}
	token, err := e.cluster.WorkerToken(e.ctx, bgAgent)
	if err != nil {
		return err
	}
	args := append(append([]string{}, e.workerArgs...), "--agent", bgAgent, "--tool-agents", bgAgent, "--concurrency", "8")
	w := harness.NewWorker(harness.WorkerOptions{
		BinDir: e.opts.BinDir, Dir: e.dir, Name: bgAgent, Target: e.target, Token: token,
		Ledger: filepath.Join(e.dir, "background-ledger.jsonl"), Script: script, Args: args, TLS: e.cluster.TLS(),
	})
	if err := w.Start(); err != nil {
		return err
	}
	e.bgWorker = w
	e.notef("started the background Worker (pid %d) %v", w.PID(), args)
	return nil
}

// waitBackgroundLedger waits until the background Worker ran the model of
// a session.
func (e *cellEnv) waitBackgroundLedger(id string) error {
	deadline := time.Now().Add(waitShort)
	for {
		l, err := harness.ReadLedger(e.bgWorker.Ledger)
		if err != nil {
			return err
		}
		for _, x := range l {
			if x.Session == id && x.Kind == "model" {
				return nil
			}
		}
		if !e.bgWorker.Running() {
			return fmt.Errorf("the background Worker exited: %s", harness.Tail(e.bgWorker.Log(), 5))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the background Worker ran no model call of %s within %s", id, waitShort)
		}
		if err := e.sleep(20 * time.Millisecond); err != nil {
			return err
		}
	}
}

// keepRunning waits for each turn of s and sends the next, until a turn
// that started after the run was told to finish has completed.
func (b *bgRun) keepRunning(s *bgSession) error {
	for last := false; ; {
		if _, err := b.e.waitFor(s.id, fmt.Sprintf("background turn %d", s.turns), waitLong, func(g *dexv1.GetSessionResponse) bool {
			return g.Session.Status == dexv1.SessionStatus_SESSION_STATUS_IDLE && g.Session.TurnsCompleted >= uint64(s.turns)
		}); err != nil {
			return err
		}
		if last {
			return nil
		}
		last = b.stopped() // the next turn starts after the stop: it is the last
		next := s.turns + 1
		if err := b.e.retry("send to "+s.id, func(ctx context.Context) error {
			_, err := b.e.cl.SendMessage(ctx, s.id, fmt.Sprintf("background turn %d", next), fmt.Sprintf("%s/%d", s.id, next))
			return err
		}); err != nil {
			return err
		}
		s.turns = next
	}
}

func (b *bgRun) stopped() bool {
	select {
	case <-b.stop:
		return true
	default:
		return false
	}
}

// halt ends the background load without judging it.
func (b *bgRun) halt() {
	b.stopOnce.Do(func() { close(b.stop) })
	b.wg.Wait()
}

// finish lets every background session complete one more turn, started
// after the takeover, and checks each: every turn completed, every Step
// succeeded at its first attempt.
func (b *bgRun) finish(leaders []string, killed string) error {
	b.halt()
	var errs []error
	for _, s := range b.sessions {
		where := fmt.Sprintf("background session %s (partition %d, led by %s; %s was killed)", s.id, s.partition, leaders[s.partition], killed)
		if s.err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, s.err))
			continue
		}
		g, err := b.e.get(s.id)
		if err != nil {
			return err
		}
		if err := bgUnfailed(g, s.turns); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
		}
		b.e.notef("%s: %d turns, steps: %s", where, s.turns, describe(g.Steps))
	}
	return errors.Join(errs...)
}

// bgUnfailed: the session completed its turns, each Step succeeded at its
// first attempt.
func bgUnfailed(g *dexv1.GetSessionResponse, turns int) error {
	if g.Session.Status != dexv1.SessionStatus_SESSION_STATUS_IDLE || g.Session.TurnsCompleted != uint64(turns) {
		return fmt.Errorf("%s with %d of %d turns completed", fsm.StatusName(fsmpb.SessionStatus(g.Session.Status)), g.Session.TurnsCompleted, turns)
	}
	for _, st := range g.Steps {
		if st.Status != stepDone || st.Outcome != oSucceeded || len(st.Attempts) != 1 || st.Attempts[0].Status != aSucceeded {
			return fmt.Errorf("a Step did not succeed at its first attempt: %s", describe([]*dexv1.Step{st}))
		}
	}
	return nil
}

// partitionsCaughtUp: a restarted node's view of every partition names a
// leader and has applied that partition's commit index; a leadership the
// balancer handed back to it counts as well as following.
func partitionsCaughtUp(parts []*dexv1.PartitionStatus, commits []uint64) (bool, string) {
	if len(parts) != len(commits) {
		return false, fmt.Sprintf("%d partitions; want %d", len(parts), len(commits))
	}
	var said []string
	done := true
	for k, p := range parts {
		said = append(said, fmt.Sprintf("p%d %s applied %d (leader %q)", k, strings.ToLower(p.State), p.AppliedIndex, p.Leader))
		if p.Leader == "" || p.AppliedIndex < commits[k] {
			done = false
		}
	}
	return done, strings.Join(said, ", ")
}
