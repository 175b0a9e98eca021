// Package cluster runs Dex's replicated state machine on hashicorp/raft:
// a raft-wal log, a raft-boltdb stable store and file snapshots in the data dir, a TCP transport,
// bootstrap and join, the leadership loop and readiness.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.uber.org/zap"

	"github.com/dexhq/dex/cluster/internal/logstore"
	"github.com/dexhq/dex/cluster/internal/peer"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// LeaderService is a leader-only subsystem (the dispatch lease, timers…).
// The leadership loop starts it once this node leads with a fresh epoch and
// stops it as soon as leadership is lost.
type LeaderService interface {
	EstablishLeadership(ctx context.Context, epoch uint64) error
	RevokeLeadership()
}

// Drainer is a LeaderService that can stop taking new work while the node
// still leads (Node.Drain): it hands out nothing new and fails nothing, but
// what is already running may still report to it.
type Drainer interface {
	Drain()
}

// ErrNotLeader matches every *NotLeaderError.
var ErrNotLeader = errors.New("not the leader")

// NotLeaderError is returned for a write sent to a node that does not lead.
// It names the leader when one is known.
type NotLeaderError struct {
	LeaderID       string
	LeaderRaftAddr string
	LeaderGRPCAddr string
	// Lost: leadership was lost while the command was in flight; it may or
	// may not have been committed.
	Lost bool
}

func (e *NotLeaderError) Error() string {
	msg := "this node is not the leader"
	if e.Lost {
		msg = "leadership was lost before the command was known to be committed"
	}
	switch {
	case e.LeaderID == "":
		return msg + "; no leader is known yet"
	case e.LeaderGRPCAddr == "":
		return fmt.Sprintf("%s; the leader is %s (raft %s)", msg, e.LeaderID, e.LeaderRaftAddr)
	default:
		return fmt.Sprintf("%s; the leader is %s at %s", msg, e.LeaderID, e.LeaderGRPCAddr)
	}
}

func (e *NotLeaderError) Is(target error) bool { return target == ErrNotLeader }

// applyStall is how long the applied index may stay behind the commit index
// without moving before the node reports itself not ready.
const applyStall = 3 * time.Second

// recentLogs is how many of the latest log entries a node keeps in memory
// (one batch of raft's MaxAppendEntries). Entries reach --max-payload, so
// the ring stays small.
const recentLogs = 64

// Node is one Dex cluster member.
type Node struct {
	cfg   Config
	log   *zap.Logger
	fsm   *fsm.FSM
	raft  *raft.Raft
	store *raftboltdb.BoltStore     // the stable store
	wal   *logstore.WALStore        // the log
	logs  *logstore.CheckedLogStore // the log as raft reads it
	trans *peer.Transport
	ident *peer.ClusterIdentity
	snaps raft.SnapshotStore // the snapshots on disk

	hl        hclog.Logger
	prep      *prepared // New's, until Start
	onApplied func(*fsm.Applied)

	notifyCh   chan bool
	handoverCh chan chan struct{}
	restoreCh  chan *restoreReq
	needsJoin  atomic.Bool
	running    atomic.Bool // Open returned it: a full disk now stops it (writeFailed)
	fullOnce   sync.Once
	shutdownCh chan struct{}
	group      *groupCommit // the leader's proposer (groupcommit.go)
	wg         sync.WaitGroup
	shutOnce   sync.Once
	fireMu     sync.Mutex // serializes readiness hooks

	mu          sync.Mutex
	services    []LeaderService
	leaderTerm  uint64 // the term whose leadership was established
	leaderEpoch uint64
	estErr      string
	draining    bool // Drain was called: no new work, running attempts finish
	handedOver  bool // Handover was called: never establish leadership again
	readyHooks  []func(ready bool, reason string)
	readyGates  []func() (ready bool, reason string)
	lastReady   bool
	lastServes  bool
	lastReason  string
	lastApplied uint64
	lastAdvance time.Time
}

// Hooks wire a node to the rest of Dex: the leader's runtime, started and
// stopped by the leadership loop, and the one stream of applied entries.
type Hooks struct {
	// LeaderServices are started when this node establishes leadership and
	// stopped when it loses it (in production: the leader's runtime). Given
	// to Start, they are in place before raft can elect this node.
	LeaderServices []LeaderService

	// OnApplied is called after each entry the state machine applied (and
	// after a snapshot restore) with what it wrote: the applied stream. It
	// runs on raft's FSM goroutine and must not wait for Apply.
	OnApplied func(*fsm.Applied)

	// ApplyObserver, when set, hears every applied batch (metrics).
	ApplyObserver ApplyObserver
}

// Open is New then Start: it checks the data dir, opens the raft stores,
// starts raft and, on an empty data dir without Join, bootstraps the
// configuration from Peers.
func Open(cfg Config, h Hooks) (*Node, error) {
	n, err := New(cfg)
	if err != nil {
		return nil, err
	}
	if err := n.Start(h); err != nil {
		return nil, err
	}
	return n, nil
}

// New checks the data dir and opens the raft stores and the transport, but
// starts nothing: the node reads an empty state and proposes nothing until
// Start. What the leader runs is built between the two, on the node.
func New(cfg Config) (n *Node, err error) {
	// A damaged store can make bbolt panic while raft reads it at start:
	// report it as an error, not a crash.
	defer func() {
		if r := recover(); r != nil {
			n, err = nil, fmt.Errorf("raft store in %s is damaged: %v", PartitionRaftDir(cfg.DataDir, cfg.partition), r)
		}
		// A full disk is named as such wherever the start met it.
		err = logstore.DiskFull(cfg.DataDir, err)
	}()
	cfg.withDefaults()
	if cfg.ID == "" {
		return nil, errors.New("node id is required")
	}
	if err := ValidateAddr(cfg.RaftAddr); err != nil {
		return nil, fmt.Errorf("raft address: %v", err)
	}
	// A Host checked and claimed the data dir with its first partition.
	fresh := false
	if cfg.partition == 0 {
		if fresh, err = checkDataDir(cfg.DataDir, cfg.ID, cfg.Partitions); err != nil {
			return nil, err
		}
	}
	if fresh {
		if err := logstore.CheckFreshSpace(cfg.DataDir); err != nil {
			return nil, err
		}
	}
	n = &Node{
		cfg:        cfg,
		log:        cfg.Logger,
		notifyCh:   make(chan bool, 1),
		handoverCh: make(chan chan struct{}),
		restoreCh:  make(chan *restoreReq),
		shutdownCh: make(chan struct{}),
	}
	n.group = newGroupCommit(n)
	hl := NewHCLogger(cfg.Logger, "raft")
	n.hl = hl

	// A fresh dir is claimed first, so a failed first start leaves a dir
	// that the next start recognises.
	ident := Identity{NodeID: cfg.ID}
	if cfg.Partitions > 1 {
		ident.Partitions = cfg.Partitions
	}
	if cfg.Join != "" {
		ident.Cluster = "joined:" + cfg.Join
	} else {
		ident.Cluster = ClusterHash(cfg.Peers)
	}
	if fresh {
		if cfg.Join == "" {
			if _, err := bootstrapConfig(cfg); err != nil {
				return nil, err
			}
		}
		if err := writeIdentity(cfg.DataDir, ident); err != nil {
			return nil, fmt.Errorf("write %s: %w", filepath.Join(cfg.DataDir, identityFile), err)
		}
	}

	raftDir := PartitionRaftDir(cfg.DataDir, cfg.partition)
	if err := os.MkdirAll(raftDir, 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", raftDir, err)
	}
	n.store, err = logstore.OpenStore(filepath.Join(raftDir, "raft.db"), cfg.DataDir)
	if err != nil {
		return nil, err
	}
	closeStore := true
	store := n.store // n is nil once an error is returned
	defer func() {
		if closeStore {
			store.Close()
		}
	}()
	if err := logstore.MigrateBoltLog(n.store, raftDir, cfg.DataDir, hl.Named("wal")); err != nil {
		return nil, err
	}
	node := n // n is nil once an error is returned
	w, err := logstore.OpenWAL(logstore.WALDir(raftDir), cfg.DataDir, hl.Named("wal"), func(err error) { node.writeFailed(err) })
	if err != nil {
		return nil, err
	}
	n.wal = w
	defer func() {
		if closeStore {
			w.Close()
		}
	}()
	// Before the snapshot store (which creates a missing snapshots dir).
	logs, _, note, loaded, err := openCheckedLog(n.store, w, logstore.WALDir(raftDir), raftDir, false)
	if err != nil {
		return nil, err
	}
	w.StartChecked()
	if note != "" {
		n.log.Warn(note)
	}
	logs.OnDamage = n.onDamage
	logs.OnWriteError = n.writeFailed
	n.logs = logs
	snaps, err := raft.NewFileSnapshotStoreWithLogger(raftDir, 2, hl.Named("snapshots"))
	if err != nil {
		return nil, fmt.Errorf("open snapshot store in %s: %w", raftDir, err)
	}
	hasState, err := raft.HasExistingState(logs, n.store, snaps)
	if err != nil {
		return nil, fmt.Errorf("raft store in %s is damaged: %v", raftDir, err)
	}

	var bootstrap *raft.Configuration
	if !hasState {
		if cfg.Join != "" {
			n.needsJoin.Store(true)
		} else {
			conf, err := bootstrapConfig(cfg)
			if err != nil {
				return nil, err
			}
			bootstrap = conf
		}
	}

	if cfg.share != nil {
		n.ident = cfg.share.ident
	} else if n.ident, err = loadClusterIdentity(cfg.DataDir, cfg.Logger); err != nil {
		return nil, err
	}
	if bootstrap != nil && cfg.partition > 0 && cfg.share.welcomed {
		// The first partition found this node welcomed by a running
		// cluster: every partition takes its log from its leader.
		bootstrap = nil
	}
	if bootstrap != nil && cfg.partition == 0 {
		welcomedBy, err := refuseExistingCluster(cfg)
		if err != nil {
			return nil, err
		}
		if welcomedBy != "" {
			// A founding member that starts after the others formed the
			// cluster: its configuration already names this node, so the
			// leader replicates the log here; bootstrapping is not needed.
			cfg.Logger.Info("the cluster at --peers names this node and it never held the cluster's data: taking the log from the leader instead of bootstrapping", zap.String("cluster_id", welcomedBy))
			bootstrap = nil
			if cfg.share != nil {
				cfg.share.welcomed = true
			}
		}
	}
	transCfg := &raft.NetworkTransportConfig{MaxPool: 3, Timeout: 10 * time.Second, Logger: hl.Named("transport")}
	if cfg.share != nil {
		n.trans, err = peer.NewGroupTransport(cfg.share.listener, cfg.partition, transCfg, cfg.Logger, cfg.ID)
	} else {
		advertise, aerr := net.ResolveTCPAddr("tcp", cfg.RaftAddr)
		if aerr != nil {
			return nil, fmt.Errorf("raft address %s: %v", cfg.RaftAddr, aerr)
		}
		n.trans, err = peer.NewTransport(cfg.RaftAddr, advertise, n.ident, transCfg, cfg.Logger, cfg.ID, cfg.TLS)
	}
	if err != nil {
		return nil, fmt.Errorf("listen on raft address %s: %v", cfg.RaftAddr, err)
	}

	n.fsm = fsm.New(fsm.Options{OnHalt: n.onHalt, OnApplied: n.applied})
	n.prep = &prepared{bootstrap: bootstrap, logs: logs, snaps: snaps, raftDir: raftDir, loaded: loaded}
	n.snaps = snaps
	closeStore = false
	return n, nil
}

// prepared is what New opened for Start.
type prepared struct {
	bootstrap *raft.Configuration
	logs      *logstore.CheckedLogStore
	snaps     raft.SnapshotStore
	raftDir   string
	loaded    *loadedSnapshot // the newest snapshot, as its check loaded it
}

// applied hands an applied entry to the hooks' stream.
func (n *Node) applied(a *fsm.Applied) {
	if n.onApplied != nil {
		n.onApplied(a)
	}
}

// Start starts raft with the hooks, bootstraps the configuration on an empty
// data dir without Join, and starts the leadership loop. On an error the
// stores are closed and the node is done.
func (n *Node) Start(h Hooks) (err error) {
	cfg := n.cfg
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("raft store in %s is damaged: %v", PartitionRaftDir(cfg.DataDir, cfg.partition), r)
		}
		err = logstore.DiskFull(cfg.DataDir, err)
	}()
	p := n.prep
	if p == nil {
		return errors.New("node already started")
	}
	n.prep = nil
	closeStore := true
	defer func() {
		if closeStore {
			n.wal.Close()
			n.store.Close()
		}
	}()
	n.onApplied = h.OnApplied
	n.services = append([]LeaderService(nil), h.LeaderServices...)
	// Every partition promotes its caught-up non-voters; the cluster id is
	// the first partition's.
	n.services = append(n.services, &membershipService{n: n})
	hl, bootstrap, logs, snaps, raftDir := n.hl, p.bootstrap, p.logs, p.snaps, p.raftDir

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.ID)
	rc.Logger = hl
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.StepDownTimeout
	rc.CommitTimeout = cfg.CommitTimeout
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.TrailingLogs = cfg.TrailingLogs
	rc.NotifyCh = n.notifyCh
	// A buffered apply channel: the commands of one ProposeAll reach the
	// leader loop together and are written and sent as one batch. Propose
	// bounds its own wait.
	rc.BatchApplyCh = true
	// The state machine holds the snapshot's state already: restoreAtStart
	// put it there from the load that checked it.
	rc.NoSnapshotRestoreOnStart = true
	// Pre-vote stays on (raft's default): a node back from a partition asks
	// before it bumps the term, so it cannot depose a healthy leader.
	rc.PreVoteDisabled = false
	if err := raft.ValidateConfig(rc); err != nil {
		n.trans.Close()
		return fmt.Errorf("raft config: %v", err)
	}
	// The leader reads each new entry back to send it to every follower,
	// and every node reads it again to apply it: a ring of the latest
	// entries, as raft stored them, saves a read and a checksum each time.
	recent, err := raft.NewLogCache(recentLogs, logs)
	if err != nil {
		n.trans.Close()
		return fmt.Errorf("raft log cache: %v", err)
	}
	stable := stableStore{StableStore: n.store, written: n.writeFailed}
	if err := restoreAtStart(n.fsm, snaps, p.loaded); err != nil {
		n.trans.Close()
		return fmt.Errorf("start raft on %s: %w", raftDir, err)
	}
	n.raft, err = raft.NewRaft(rc, &raftFSM{f: n.fsm, obs: h.ApplyObserver}, recent, stable, snaps, n.trans)
	if err != nil {
		n.trans.Close()
		return fmt.Errorf("start raft on %s: %w", raftDir, err)
	}
	n.trans.SetRaft(n.raft)
	if cfg.partition == 0 {
		n.ident.SetWelcome(n.neverHeldData)
	}
	if bootstrap != nil {
		if err := n.raft.BootstrapCluster(*bootstrap).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			n.raft.Shutdown().Error()
			n.trans.Close()
			return fmt.Errorf("bootstrap: %w", err)
		}
		n.log.Info("bootstrapped the cluster configuration", zap.Int("voters", len(bootstrap.Servers)))
	}
	closeStore = false
	n.lastAdvance = time.Now()
	n.running.Store(true)

	n.wg.Add(4)
	go n.group.loop()
	go n.storedMarkLoop()
	go n.leaderLoop()
	go n.readinessLoop()
	if cfg.partition == 0 {
		// The cluster id and the nodes' addresses live in the first
		// partition's state.
		n.wg.Add(2)
		go n.identityLoop()
		go n.registerLoop()
	}
	return nil
}

func bootstrapConfig(cfg Config) (*raft.Configuration, error) {
	if len(cfg.Peers) == 0 {
		return nil, errors.New("an empty data dir needs --peers (or --join) to start")
	}
	conf := &raft.Configuration{}
	self := false
	for _, p := range cfg.Peers {
		if p.ID == cfg.ID {
			self = true
			if p.RaftAddr != cfg.RaftAddr {
				return nil, fmt.Errorf("--peers gives %s the raft address %s but --raft-addr is %s", p.ID, p.RaftAddr, cfg.RaftAddr)
			}
		}
		conf.Servers = append(conf.Servers, raft.Server{
			Suffrage: raft.Voter,
			ID:       raft.ServerID(p.ID),
			Address:  raft.ServerAddress(p.RaftAddr),
		})
	}
	if !self {
		return nil, fmt.Errorf("node %s is not in --peers", cfg.ID)
	}
	return conf, nil
}

func (n *Node) onHalt(err error) {
	n.log.Error("state machine halted", zap.Error(err))
	if n.cfg.OnHalt != nil {
		n.cfg.OnHalt(err)
	}
}

// ID is this node's id.
func (n *Node) ID() string { return n.cfg.ID }

// Partition is the partition this Node is the raft group of (0 for a
// cluster of one).
func (n *Node) Partition() int { return int(n.cfg.partition) }

// Info is this node's addresses as recorded in the replicated state.
func (n *Node) Info() *fsmpb.NodeInfo {
	return &fsmpb.NodeInfo{
		Id:          n.cfg.ID,
		RaftAddress: n.cfg.RaftAddr,
		GrpcAddress: n.cfg.GRPCAddr,
		HttpAddress: n.cfg.HTTPAddr,
		LogVersion:  fsm.LogVersion,
	}
}

// NeedsJoin reports that the node started without raft state and with a
// join address: it must call Join once its gRPC server is up.
func (n *Node) NeedsJoin() bool { return n.needsJoin.Load() }

// Raft is the underlying raft instance (tests, advanced operations).
func (n *Node) Raft() *raft.Raft { return n.raft }

// FSM is the state machine.
func (n *Node) FSM() *fsm.FSM { return n.fsm }

// State is a consistent read view of the replicated state.
func (n *Node) State() *fsm.State { return n.fsm.State() }

// IsLeader reports whether raft considers this node the leader.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// Leader returns the leader's addresses (GrpcAddress empty while the leader
// has not recorded it), or nil when no leader is known.
func (n *Node) Leader() *fsmpb.NodeInfo {
	addr, id := n.raft.LeaderWithID()
	if id == "" {
		return nil
	}
	info := &fsmpb.NodeInfo{Id: string(id), RaftAddress: string(addr)}
	if known := n.nodeInfo(string(id)); known != nil {
		info.GrpcAddress = known.GrpcAddress
		info.HttpAddress = known.HttpAddress
	}
	return info
}

func (n *Node) nodeInfo(id string) *fsmpb.NodeInfo {
	registry := n
	if n.cfg.share != nil && n.cfg.share.registry != nil {
		registry = n.cfg.share.registry // the nodes table is partition 0's
	}
	for _, ni := range registry.fsm.State().Nodes() {
		if ni.Id == id {
			return ni
		}
	}
	return nil
}

func (n *Node) notLeader() *NotLeaderError {
	e := &NotLeaderError{}
	if l := n.Leader(); l != nil && l.Id != n.cfg.ID {
		e.LeaderID, e.LeaderRaftAddr, e.LeaderGRPCAddr = l.Id, l.RaftAddress, l.GrpcAddress
	}
	return e
}

// NotLeader describes the current leader for a refused write.
func (n *Node) NotLeader() *NotLeaderError { return n.notLeader() }

// Propose commits a command through raft and returns the state machine's
// result. A command without a time gets the leader's clock. Callers check
// Result.Err for a rejection.
func (n *Node) Propose(ctx context.Context, cmd *fsmpb.Command) (*fsm.Result, error) {
	type answer struct {
		res *fsm.Result
		err error
	}
	ch := make(chan answer, 1)
	if err := n.ProposeAll(ctx, []*fsmpb.Command{cmd}, func(_ int, res *fsm.Result, err error) { ch <- answer{res, err} }); err != nil {
		return nil, err
	}
	select {
	case a := <-ch:
		return a.res, a.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// ProposeAll hands cmds to raft one behind the other, in order, so they
// are written and sent in one batch, and reports what became of each to
// answered, in order, from a goroutine of its own, once raft answered it
// (applied, with the state machine's result, or failed), whatever ctx
// does. A command without a time gets the leader's clock. An error means
// none was handed to raft and answered is never called.
func (n *Node) ProposeAll(ctx context.Context, cmds []*fsmpb.Command, answered func(i int, res *fsm.Result, err error)) error {
	if n.raft.State() != raft.Leader {
		return n.notLeader()
	}
	p := &proposalGroup{data: make([][]byte, len(cmds)), answered: answered}
	for i, cmd := range cmds {
		if cmd.GetNowMs() == 0 {
			cmd = cmd.CloneVT()
			cmd.NowMs = time.Now().UnixMilli()
		}
		d, err := fsm.Encode(cmd)
		if err != nil {
			return fmt.Errorf("encode command: %v", err)
		}
		p.data[i] = d
		p.size += len(d)
	}
	p.deadline = time.Now().Add(10 * time.Second)
	if dl, ok := ctx.Deadline(); ok {
		if time.Until(dl) <= 0 {
			return context.DeadlineExceeded
		}
		p.deadline = dl
	}
	if n.group.allowed.Load() {
		n.group.add(p)
		return nil
	}
	// A member of an older version cannot read Batch entries: one entry
	// per command, handed to raft one behind the other.
	futures := make([]raft.ApplyFuture, len(p.data))
	for i, d := range p.data {
		futures[i] = n.raft.Apply(d, time.Until(p.deadline))
	}
	go func() {
		for i, f := range futures {
			res, err := n.committed(f)
			answered(i, res, err)
		}
	}()
	return nil
}

// committed waits for raft's answer to a proposal and returns the state
// machine's result, or the error Propose returns.
func (n *Node) committed(f raft.ApplyFuture) (*fsm.Result, error) {
	if err := n.proposeError(f.Error()); err != nil {
		return nil, err
	}
	res, _ := f.Response().(*fsm.Result)
	if res == nil {
		return nil, fmt.Errorf("raft apply: no state machine result (got %T)", f.Response())
	}
	return res, nil
}

// proposeError turns raft's answer to a proposal into the error Propose
// returns (nil when it committed).
func (n *Node) proposeError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return n.notLeader()
	case errors.Is(err, raft.ErrLeadershipLost):
		e := n.notLeader()
		e.Lost = true
		return e
	default:
		return fmt.Errorf("raft apply: %w", err)
	}
}

// RaftStatus is this node's raft view.
type RaftStatus struct {
	ID           string
	State        string // "leader", "follower", "candidate", "shutdown"
	Term         uint64
	CommitIndex  uint64
	AppliedIndex uint64
	LastIndex    uint64
	LeaderID     string
	LeaderAddr   string
	Epoch        uint64
}

// StateName turns a raft state into the word Dex shows.
func StateName(s raft.RaftState) string {
	switch s {
	case raft.Leader:
		return "leader"
	case raft.Follower:
		return "follower"
	case raft.Candidate:
		return "candidate"
	default:
		return "shutdown"
	}
}

// Status returns this node's raft view.
func (n *Node) Status() RaftStatus {
	addr, id := n.raft.LeaderWithID()
	return RaftStatus{
		ID:           n.cfg.ID,
		State:        StateName(n.raft.State()),
		Term:         n.raft.CurrentTerm(),
		CommitIndex:  n.raft.CommitIndex(),
		AppliedIndex: n.raft.AppliedIndex(),
		LastIndex:    n.raft.LastIndex(),
		LeaderID:     string(id),
		LeaderAddr:   string(addr),
		Epoch:        n.fsm.State().Meta().GetEpoch(),
	}
}

// Configuration returns the raft configuration (the members).
func (n *Node) Configuration() ([]raft.Server, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, err
	}
	return f.Configuration().Servers, nil
}

// Drain stops this node from taking new work while it keeps leading: the
// leader services that are Drainers stop handing out tasks and stop failing
// attempts, and the node reports itself not ready ("draining"), while the
// Worker calls of attempts already running (claim, heartbeat, complete,
// fail) are still served (ServesAttempts). Leadership is handed over later,
// by Handover or Shutdown. Drain is for a node about to stop; it cannot be
// undone.
func (n *Node) Drain() {
	n.mu.Lock()
	if n.draining {
		n.mu.Unlock()
		return
	}
	n.draining = true
	established := n.leaderTerm != 0
	n.mu.Unlock()
	n.log.Info("draining: no new work is handed out; running attempts may finish")
	if established {
		// Otherwise establish drains the services once it started them.
		n.drainServices()
	}
	n.fireNow()
}

// Draining reports whether Drain was called.
func (n *Node) Draining() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.draining
}

func (n *Node) drainServices() {
	n.mu.Lock()
	services := append([]LeaderService(nil), n.services...)
	n.mu.Unlock()
	for _, s := range services {
		if d, ok := s.(Drainer); ok {
			d.Drain()
		}
	}
}

// Handover stops the leader services for good (none of them proposes after
// it returns, and this node never establishes leadership again) and then,
// when this node leads and another voter exists, transfers leadership to
// the most up-to-date voter, so the cluster has a leader again without
// waiting for an election timeout. It returns the transfer's error.
func (n *Node) Handover() error {
	n.mu.Lock()
	n.handedOver = true
	n.mu.Unlock()
	req := make(chan struct{})
	select {
	case n.handoverCh <- req:
		<-req
	case <-n.shutdownCh:
		return nil
	}
	n.fireNow()
	if !n.IsLeader() {
		return nil
	}
	servers, err := n.Configuration()
	if err != nil {
		return err
	}
	if voters(servers) < 2 {
		return nil
	}
	if err := n.raft.LeadershipTransfer().Error(); err != nil {
		return fmt.Errorf("leadership transfer: %w", err)
	}
	// The new leader is usually known a heartbeat later; name it if so.
	var id raft.ServerID
	for wait := time.Now().Add(time.Second); time.Now().Before(wait); time.Sleep(20 * time.Millisecond) {
		if _, id = n.raft.LeaderWithID(); id != "" {
			break
		}
	}
	n.log.Info("leadership handed over", zap.String("to", string(id)))
	return nil
}

// storedMarkLoop records the stored-up-to mark every second (internal/logstore/storedmark.go).
func (n *Node) storedMarkLoop() {
	defer n.wg.Done()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-n.shutdownCh:
			return
		case <-t.C:
			if err := n.logs.RecordStoredUpTo(); err != nil {
				n.log.Warn("record the stored-up-to mark", zap.Error(err))
			}
		}
	}
}

// Shutdown stops the leader-only services, hands leadership over when this
// node leads, stops raft and closes the stores.
func (n *Node) Shutdown() error {
	var err error
	n.shutOnce.Do(func() {
		if terr := n.Handover(); terr != nil {
			n.log.Info("leadership transfer before shutdown failed", zap.Error(terr))
		}
		close(n.shutdownCh)
		n.wg.Wait()
		if serr := n.raft.Shutdown().Error(); serr != nil {
			err = serr
		}
		if terr := n.trans.Close(); terr != nil && err == nil {
			err = terr
		}
		n.running.Store(false) // stopping anyway: a full disk is only logged now
		if merr := n.logs.RecordStoredUpTo(); merr != nil {
			n.log.Warn("record the stored-up-to mark", zap.Error(merr))
		}
		if cerr := n.wal.Close(); cerr != nil && err == nil {
			err = cerr
		}
		if cerr := n.store.Close(); cerr != nil && err == nil {
			err = cerr
		}
	})
	return err
}

func voters(servers []raft.Server) int {
	c := 0
	for _, s := range servers {
		if s.Suffrage == raft.Voter {
			c++
		}
	}
	return c
}

var _ hclog.Logger = (*zapHCLog)(nil)
