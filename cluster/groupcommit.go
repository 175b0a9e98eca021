package cluster

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/dexhq/dex/fsm"
)

// Group commit: the leader's commands go to raft through one proposer
// that, while earlier entries are being written and replicated, gathers
// what callers proposed meanwhile into one Batch entry. Under load many
// commands share one entry, so raft's per-entry work (the log write, the
// AppendEntries encoding, each follower's decoding and storing) is paid
// once for all of them; unloaded, a command goes out at once, alone.
const (
	// groupInFlight bounds the entries the proposer has in raft at once:
	// the next batch fills while they commit. One, not two: each entry in
	// flight is a log write and an AppendEntries round per follower, and a
	// round costs the same CPU however few commands it carries; with one,
	// a partition's rounds carry more (BENCHMARKS.md, "One entry in flight
	// per group"), and an unloaded command still goes out at once.
	groupInFlight = 1
	// groupMaxCommands and groupMaxBytes bound one Batch entry; the
	// commands of one ProposeAll always share an entry.
	groupMaxCommands = 256
	groupMaxBytes    = 1 << 20
	// groupCheckEvery is how often the leader checks that every member
	// applies Batch entries (a node of an older version does not).
	groupCheckEvery = time.Second
)

// proposalGroup is the commands of one ProposeAll, encoded.
type proposalGroup struct {
	data     [][]byte
	size     int
	deadline time.Time
	answered func(i int, res *fsm.Result, err error)
}

type groupCommit struct {
	n       *Node
	allowed atomic.Bool // every member applies Batch entries
	slots   chan struct{}

	mu    sync.Mutex
	queue []*proposalGroup
	wake  chan struct{}
}

func newGroupCommit(n *Node) *groupCommit {
	return &groupCommit{n: n, slots: make(chan struct{}, groupInFlight), wake: make(chan struct{}, 1)}
}

// add queues a group for the proposer.
func (g *groupCommit) add(p *proposalGroup) {
	g.mu.Lock()
	g.queue = append(g.queue, p)
	g.mu.Unlock()
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// loop proposes the queued groups until the node shuts down, then fails
// what is still queued.
func (g *groupCommit) loop() {
	defer g.n.wg.Done()
	check := time.NewTicker(groupCheckEvery)
	defer check.Stop()
	g.allowed.Store(g.n.membersApplyBatches())
	for {
		select {
		case <-g.n.shutdownCh:
			g.failQueued(raft.ErrRaftShutdown)
			return
		case <-check.C:
			g.allowed.Store(g.n.membersApplyBatches())
			continue
		case <-g.wake:
		}
		for {
			select {
			case g.slots <- struct{}{}:
			case <-g.n.shutdownCh:
				g.failQueued(raft.ErrRaftShutdown)
				return
			}
			groups := g.take()
			if len(groups) == 0 {
				<-g.slots
				break
			}
			g.propose(groups)
		}
	}
}

// take removes from the queue the groups of the next entry: at least one,
// then as many as fit.
func (g *groupCommit) take() []*proposalGroup {
	g.mu.Lock()
	defer g.mu.Unlock()
	n, cmds, size := 0, 0, 0
	for _, p := range g.queue {
		if n > 0 && (cmds+len(p.data) > groupMaxCommands || size+p.size > groupMaxBytes) {
			break
		}
		n, cmds, size = n+1, cmds+len(p.data), size+p.size
	}
	groups := g.queue[:n:n]
	g.queue = g.queue[n:]
	if len(g.queue) == 0 {
		g.queue = nil
	}
	return groups
}

// propose hands groups to raft as one entry (a lone command as an entry of
// its own) and answers each command once raft answers, releasing its slot.
func (g *groupCommit) propose(groups []*proposalGroup) {
	now := time.Now()
	live := groups[:0]
	for _, p := range groups {
		if now.After(p.deadline) {
			answerAll(p, nil, context.DeadlineExceeded)
			continue
		}
		live = append(live, p)
	}
	if len(live) == 0 {
		<-g.slots
		return
	}
	var all [][]byte
	deadline := live[0].deadline
	for _, p := range live {
		all = append(all, p.data...)
		if p.deadline.Before(deadline) {
			deadline = p.deadline
		}
	}
	data := all[0]
	if len(all) > 1 {
		var err error
		if data, err = fsm.EncodeBatch(all); err != nil {
			<-g.slots
			for _, p := range live {
				answerAll(p, nil, err)
			}
			return
		}
	}
	f := g.n.raft.Apply(data, time.Until(deadline))
	batched := len(all) > 1
	go func() {
		res, err := g.n.committed(f)
		<-g.slots
		results := []*fsm.Result{res}
		if err == nil && batched {
			if results = res.Batch; len(results) != len(all) {
				err = fmt.Errorf("raft apply: a batch of %d commands gave %d results", len(all), len(results))
			}
		}
		at := 0
		for _, p := range live {
			if err != nil {
				answerAll(p, nil, err)
				continue
			}
			for i := range p.data {
				p.answered(i, results[at], nil)
				at++
			}
		}
	}()
}

func answerAll(p *proposalGroup, res *fsm.Result, err error) {
	for i := range p.data {
		p.answered(i, res, err)
	}
}

func (g *groupCommit) failQueued(err error) {
	g.mu.Lock()
	queue := g.queue
	g.queue = nil
	g.mu.Unlock()
	for _, p := range queue {
		answerAll(p, nil, err)
	}
}

// membersApplyBatches reports that every member of the raft configuration
// recorded a node version that applies Batch entries.
func (n *Node) membersApplyBatches() bool { return n.MembersApply(fsm.BatchLogVersion) }

// MembersApply reports that every member of the raft configuration recorded
// a log version of at least v (fsm.LogVersion's): a leader writes the
// entries of that version only then.
func (n *Node) MembersApply(v uint32) bool {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	servers := f.Configuration().Servers
	if len(servers) == 0 {
		return false
	}
	for _, s := range servers {
		info := n.nodeInfo(string(s.ID))
		if info == nil || info.LogVersion < v {
			return false
		}
	}
	return true
}

// GroupCommit reports that this node, as leader, gathers commands into
// Batch entries: every member applies them.
func (n *Node) GroupCommit() bool { return n.group.allowed.Load() }
