package soak

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/chaos/harness"
)

// The soak's faults and their schedule. The schedule is drawn from the
// seed alone (math/rand/v2, PCG): the same seed draws the same faults, in
// the same order, with the same gaps, holds and targets. Which node is the
// leader when a fault strikes is the cluster's doing, not the schedule's;
// in a cluster of several partitions the schedule draws which partition's
// leader each leader fault strikes.

// Fault kinds.
const (
	FKillNode        = "kill-node"         // SIGKILL one node, restart it on its data dir
	FKillLeader      = "kill-leader"       // SIGKILL the leader, restart it
	FKillTwo         = "kill-two"          // SIGKILL two nodes at once, restart them
	FKillAll         = "kill-all"          // SIGKILL every node, restart them
	FPauseLeader     = "pause-leader"      // SIGSTOP the leader, SIGCONT after the hold
	FPauseFollower   = "pause-follower"    // SIGSTOP a follower
	FKillWorker      = "kill-worker"       // SIGKILL a Worker, start it again
	FPauseWorker     = "pause-worker"      // SIGSTOP a Worker (no heartbeats), SIGCONT
	FTransfer        = "transfer"          // leadership transfer through the admin RPC
	FIsolateLeader   = "isolate-leader"    // partition the leader from both followers
	FIsolateFollower = "isolate-follower"  // partition one follower
	FOneWay          = "one-way"           // cut the leader's traffic to one follower, one way
	FSlowLink        = "slow-link"         // latency on the leader's links
	FDisconnect      = "disconnect-worker" // cut a Worker's connections to every node, the process running
	FSlowDisk        = "slow-disk"         // one node's log writes sleep (a failpoint of the chaos build)
)

// leaderFaults: the kinds that find their target through the leader (the
// leader itself, a follower of it, its links, its leadership). In a
// cluster of several partitions each strikes the leader of one partition,
// drawn with the fault (Fault.Partition).
var leaderFaults = []string{FKillLeader, FPauseLeader, FPauseFollower, FTransfer, FIsolateLeader, FIsolateFollower, FOneWay, FSlowLink}

// NodeFaults: the kinds that need nothing but signals and the admin RPC.
var NodeFaults = []string{FKillNode, FKillLeader, FKillTwo, FKillAll, FPauseLeader, FPauseFollower, FKillWorker, FPauseWorker, FTransfer, FDisconnect}

// NetFaults: the kinds that need the harness's network fault layer.
var NetFaults = []string{FIsolateLeader, FIsolateFollower, FOneWay, FSlowLink}

// FailpointFaults: the kinds that need the chaos build's failpoints.
var FailpointFaults = []string{FSlowDisk}

// Net is what the soak needs of the harness's per-link raft network
// faults; node names are Node.ID.
type Net interface {
	Cut(from, to string)
	Partition(a, b string)
	Isolate(node string)
	Heal()
	Latency(from, to string, d time.Duration)
}

// soakNetwork, when set, builds the cluster with its network fault layer
// (it may change the options) and returns the layer once the cluster is
// made; it is used only with the chaos build of dexd, which follows the
// layer's proxies. Without it the network kinds are not drawn.
var soakNetwork func(o *harness.ClusterOptions) func(*harness.Cluster) Net

// Fault is one scheduled fault.
type Fault struct {
	N    int           `json:"n"`
	Kind string        `json:"kind"`
	Gap  time.Duration `json:"gap_ns"`  // quiet time before it
	Hold time.Duration `json:"hold_ns"` // how long it lasts before it is healed
	// Pick chooses among candidates (which follower, which Worker, which two
	// nodes) deterministically.
	Pick int `json:"pick"`
	// Partition: in a cluster of several partitions, the partition whose
	// leader a fault of leaderFaults strikes (0 otherwise).
	Partition int `json:"partition,omitempty"`
}

// Schedule is the endless sequence of faults a seed draws.
type Schedule struct {
	r     *rand.Rand
	kinds []string
	n     int
	// partitions > 1: each leader fault also draws its partition, from pr,
	// a stream of the seed's own, so that the kinds, gaps, holds and picks
	// are those a cluster of one partition gets.
	partitions int
	pr         *rand.Rand
}

// NewSchedule starts the sequence of seed over kinds.
func NewSchedule(seed uint64, kinds []string) *Schedule {
	return &Schedule{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), pr: rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d)), kinds: kinds}
}

// OverPartitions makes the leader faults of a cluster of n partitions
// strike the leader of a partition drawn each time (n ≤ 1: the one).
func (s *Schedule) OverPartitions(n int) *Schedule {
	s.partitions = n
	return s
}

// Next draws the next fault.
func (s *Schedule) Next() Fault {
	s.n++
	f := Fault{
		N:    s.n,
		Kind: s.kinds[s.r.IntN(len(s.kinds))],
		Gap:  time.Duration(1000+s.r.IntN(4000)) * time.Millisecond,
		Hold: time.Duration(300+s.r.IntN(3700)) * time.Millisecond,
		Pick: s.r.IntN(1 << 30),
	}
	if s.partitions > 1 && slices.Contains(leaderFaults, f.Kind) {
		f.Partition = s.pr.IntN(s.partitions)
	}
	return f
}

// First draws the first n faults.
func (s *Schedule) First(n int) []Fault {
	out := make([]Fault, n)
	for i := range out {
		out[i] = s.Next()
	}
	return out
}

// inject strikes f, waits its hold, heals it and waits until the cluster
// serves again. It returns what it did, for the report.
func (s *soaker) inject(ctx context.Context, f Fault) (string, error) {
	c := s.cluster
	switch f.Kind {
	case FKillNode, FKillLeader, FKillTwo, FKillAll:
		var victims []*harness.Node
		led := ""
		switch f.Kind {
		case FKillNode:
			victims = []*harness.Node{c.Nodes[f.Pick%len(c.Nodes)]}
		case FKillLeader:
			l, err := s.leaderOf(ctx, f.Partition)
			if err != nil {
				return "", err
			}
			victims = []*harness.Node{l}
			led = s.ledBy(f, l)
		case FKillTwo:
			i := f.Pick % len(c.Nodes)
			victims = []*harness.Node{c.Nodes[i], c.Nodes[(i+1+f.Pick/7%(len(c.Nodes)-1))%len(c.Nodes)]}
		case FKillAll:
			victims = c.Nodes
		}
		for _, n := range victims {
			n.Kill()
		}
		if err := sleepCtx(ctx, f.Hold); err != nil {
			return "", err
		}
		for _, n := range victims {
			if err := n.Start(); err != nil {
				return "", err
			}
		}
		return "SIGKILL " + nodeIDs(victims) + ", restarted after " + f.Hold.Round(time.Millisecond).String() + led, nil
	case FPauseLeader, FPauseFollower:
		l, err := s.leaderOf(ctx, f.Partition)
		if err != nil {
			return "", err
		}
		n := l
		if f.Kind == FPauseFollower {
			fs := s.followers(l)
			n = fs[f.Pick%len(fs)]
		}
		if err := n.Signal(syscall.SIGSTOP); err != nil {
			return "", err
		}
		err = sleepCtx(ctx, f.Hold)
		_ = n.Signal(syscall.SIGCONT)
		return fmt.Sprintf("SIGSTOP %s for %s%s", n.ID, f.Hold.Round(time.Millisecond), s.ledBy(f, l)), err
	case FKillWorker, FPauseWorker:
		w := s.workers[f.Pick%len(s.workers)]
		if f.Kind == FPauseWorker {
			if err := w.Signal(syscall.SIGSTOP); err != nil {
				return "", err
			}
			err := sleepCtx(ctx, f.Hold)
			_ = w.Signal(syscall.SIGCONT)
			return fmt.Sprintf("SIGSTOP %s for %s", w.Name, f.Hold.Round(time.Millisecond)), err
		}
		w.Kill()
		if err := sleepCtx(ctx, f.Hold); err != nil {
			return "", err
		}
		return "SIGKILL " + w.Name + ", restarted", w.Start()
	case FDisconnect:
		i := f.Pick % len(s.links)
		s.links[i].Cut()
		err := sleepCtx(ctx, f.Hold)
		s.links[i].Heal()
		return fmt.Sprintf("cut Worker slot w%d's connections for %s", i+1, f.Hold.Round(time.Millisecond)), err
	case FSlowDisk:
		if len(s.gofail) == 0 {
			return "", fmt.Errorf("%s needs the chaos build of dexd", f.Kind)
		}
		n := c.Nodes[f.Pick%len(c.Nodes)]
		delay := 20 + f.Pick/7%180 // ms per log write
		if err := harness.SetFailpoint(s.gofail[n.ID], harness.FailpointSlowDisk, fmt.Sprintf("sleep(%d)", delay)); err != nil {
			return "", err
		}
		err := sleepCtx(ctx, f.Hold)
		_ = harness.SetFailpoint(s.gofail[n.ID], harness.FailpointSlowDisk, "") // a node killed meanwhile forgot it anyway
		return fmt.Sprintf("%dms per log write on %s for %s", delay, n.ID, f.Hold.Round(time.Millisecond)), err
	case FTransfer:
		l, err := s.leaderOf(ctx, f.Partition)
		if err != nil {
			return "", err
		}
		fs := s.followers(l)
		to := fs[f.Pick%len(fs)]
		tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		of := ""
		if s.cluster.Partitions() > 1 {
			tctx = client.ToPartition(tctx, f.Partition) // any node takes it to that partition's leader
			of = fmt.Sprintf(" (partition %d)", f.Partition)
		}
		resp, err := s.admin.TransferLeadership(tctx, &dexv1.TransferLeadershipRequest{NodeId: to.ID})
		if err != nil {
			// A refusal (a lagging target) is a fault that did not happen, not a failure.
			return fmt.Sprintf("transfer %s → %s%s refused: %v", l.ID, to.ID, of, oneLine(err.Error())), nil
		}
		return fmt.Sprintf("transfer %s → %s%s", l.ID, resp.GetNewLeader(), of), nil
	case FIsolateLeader, FIsolateFollower, FOneWay, FSlowLink:
		if s.net == nil {
			return "", fmt.Errorf("%s needs the network fault layer", f.Kind)
		}
		l, err := s.leaderOf(ctx, f.Partition)
		if err != nil {
			return "", err
		}
		fs := s.followers(l)
		other := fs[f.Pick%len(fs)]
		var what string
		switch f.Kind {
		case FIsolateLeader:
			s.net.Isolate(l.ID)
			what = "isolate leader " + l.ID
		case FIsolateFollower:
			s.net.Isolate(other.ID)
			what = "isolate follower " + other.ID
		case FOneWay:
			s.net.Cut(l.ID, other.ID)
			what = fmt.Sprintf("cut %s → %s one way", l.ID, other.ID)
		case FSlowLink:
			for _, o := range fs {
				s.net.Latency(l.ID, o.ID, 200*time.Millisecond)
			}
			what = "200ms latency on leader " + l.ID + "'s links"
		}
		err = sleepCtx(ctx, f.Hold)
		s.net.Heal()
		for _, o := range fs {
			s.net.Latency(l.ID, o.ID, 0)
		}
		return fmt.Sprintf("%s for %s%s", what, f.Hold.Round(time.Millisecond), s.ledBy(f, l)), err
	}
	return "", fmt.Errorf("unknown fault kind %q", f.Kind)
}

// leader waits for the single ready node (with several partitions: until
// every running node is ready and they agree on each partition's leader,
// and returns partition 0's).
func (s *soaker) leader(ctx context.Context) (*harness.Node, error) {
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	return s.cluster.WaitReady(wctx)
}

// leaderOf waits as leader does and returns the leader of partition k.
func (s *soaker) leaderOf(ctx context.Context, k int) (*harness.Node, error) {
	if s.cluster.Partitions() == 1 {
		return s.leader(ctx)
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	return s.cluster.WaitPartitions(wctx, k)
}

// ledBy names, in a cluster of several partitions, the partition whose
// leader l a leader fault struck through ("" with one partition).
func (s *soaker) ledBy(f Fault, l *harness.Node) string {
	if s.cluster.Partitions() == 1 {
		return ""
	}
	return fmt.Sprintf(" (partition %d's leader: %s)", f.Partition, l.ID)
}

func (s *soaker) followers(l *harness.Node) []*harness.Node {
	var out []*harness.Node
	for _, n := range s.cluster.Nodes {
		if n != l {
			out = append(out, n)
		}
	}
	return out
}

func nodeIDs(ns []*harness.Node) string {
	s := ""
	for i, n := range ns {
		if i > 0 {
			s += "+"
		}
		s += n.ID
	}
	return s
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " …"
	}
	return s
}
