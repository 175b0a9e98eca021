package client

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// node is one fake Dex node on 127.0.0.1:0: a real gRPC server with the
// health service and test implementations of the Dex services.
type node struct {
	name   string
	addr   string
	srv    *grpc.Server
	health *health.Server

	mu      sync.Mutex
	serving bool
}

func startNode(t *testing.T, name string, ws dexv1.WorkerServiceServer, ss dexv1.SessionServiceServer) *node {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &node{name: name, addr: lis.Addr().String(), srv: grpc.NewServer(), health: health.NewServer()}
	healthpb.RegisterHealthServer(n.srv, n.health)
	if ws != nil {
		dexv1.RegisterWorkerServiceServer(n.srv, ws)
	}
	if ss != nil {
		dexv1.RegisterSessionServiceServer(n.srv, ss)
	}
	n.setServing(false)
	go func() { _ = n.srv.Serve(lis) }()
	t.Cleanup(n.srv.Stop)
	return n
}

func (n *node) setServing(on bool) {
	n.mu.Lock()
	n.serving = on
	n.mu.Unlock()
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if on {
		st = healthpb.HealthCheckResponse_SERVING
	}
	n.health.SetServingStatus("dex.v1.WorkerService", st)
	n.health.SetServingStatus("dex.v1.SessionService", st)
}

func (n *node) isServing() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.serving
}

// fakeWorkers is a WorkerService shared by the fake nodes of one test: a
// node that is not serving answers Unavailable, like a follower.
type fakeWorkers struct {
	mu           sync.Mutex
	tasks        []*dexv1.Task
	log          []string // "claim 1@A", "hb 1@A", "complete 2@B", ...
	claims       []*dexv1.AttemptRef
	completes    []*dexv1.ReportTaskRequest // reports of a result
	fails        []*dexv1.ReportTaskRequest // reports of a failure
	registered   int
	lastRegister *dexv1.RegisterWorkerRequest
	// Answers to give before the real one.
	completeUnavailable int
	hbCancelled         bool
	// unknownPolls: polls answered as for a deregistered Worker.
	unknownPolls int
	// registerErr, deregisterErr: the answers to registrations and
	// deregistrations (nil: OK).
	registerErr, deregisterErr error
	deregistered               []string
	changed                    chan struct{}

	// partitions is what RegisterWorker answers. A poll naming a partition
	// (PartitionMetadataKey) gets the tasks of byPartition, one naming none
	// those of tasks. polls is the partition each poll named, in the order
	// they came ("": none); pollsOut counts those not answered yet by
	// partition, mostPollsOut the most out at once, and doubled lists the
	// polls that came while another of their partition was out (one loop
	// per partition polls one at a time).
	partitions  uint32
	byPartition map[string][]*dexv1.Task
	polls       []string
	// longestWait is the longest wait_ms a poll asked for.
	longestWait  uint32
	pollsOut     map[string]int
	mostPollsOut int
	doubled      []string
	// downPartitions are answered Unavailable, as by a partition without a
	// leader.
	downPartitions map[string]bool
	// concurrency, when set, is checked at each poll: the tasks handed out
	// and not reported yet plus those the polls in flight ask for (booked)
	// must not exceed it; overbooked lists the polls that did.
	concurrency int
	booked      int
	overbooked  []string
}

func newFakeWorkers(tasks ...*dexv1.Task) *fakeWorkers {
	return &fakeWorkers{tasks: tasks, byPartition: map[string][]*dexv1.Task{}, pollsOut: map[string]int{}, changed: make(chan struct{}, 1000)}
}

// take hands out up to n tasks of the partition part names.
func (f *fakeWorkers) take(part string, n int) []*dexv1.Task {
	q := f.tasks
	if part != "" {
		q = f.byPartition[part]
	}
	n = min(n, len(q))
	if part == "" {
		f.tasks = q[n:]
	} else {
		f.byPartition[part] = q[n:]
	}
	return q[:n]
}

// book counts n task slots taken (n < 0: freed) against concurrency.
func (f *fakeWorkers) book(n int, what string) {
	if f.concurrency == 0 {
		return
	}
	f.booked += n
	if n > 0 && f.booked > f.concurrency {
		f.overbooked = append(f.overbooked, fmt.Sprintf("%s: %d slots booked, concurrency %d", what, f.booked, f.concurrency))
	}
}

// partitionOf is the partition a call names ("": none; several values
// joined by commas).
func partitionOf(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	return strings.Join(md.Get(PartitionMetadataKey), ",")
}

func (f *fakeWorkers) note(s string) {
	f.log = append(f.log, s)
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

func (f *fakeWorkers) snapshot() (log []string, claims, completes, fails int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.log...), len(f.claims), len(f.completes), len(f.fails)
}

// waitFor waits until cond holds on the fake's state.
func (f *fakeWorkers) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		f.mu.Lock()
		ok := cond()
		f.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-f.changed:
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			t.Fatalf("timed out waiting for %s; log %v", what, f.log)
		}
	}
}

// fakeWorkerNode serves f on behalf of one node.
type fakeWorkerNode struct {
	dexv1.UnimplementedWorkerServiceServer
	f *fakeWorkers
	n *node
}

func (s *fakeWorkerNode) gate() error {
	if s.n == nil || !s.n.isServing() {
		return status.Error(codes.Unavailable, "not the lease holder")
	}
	return nil
}

func (s *fakeWorkerNode) RegisterWorker(ctx context.Context, req *dexv1.RegisterWorkerRequest) (*dexv1.RegisterWorkerResponse, error) {
	if err := s.gate(); err != nil {
		return nil, err
	}
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	if s.f.registerErr != nil {
		return nil, s.f.registerErr
	}
	s.f.registered++
	s.f.lastRegister = req
	s.f.note("register@" + s.n.name)
	return &dexv1.RegisterWorkerResponse{HeartbeatIntervalMs: 20, HeartbeatTimeoutMs: 1000, NodeId: s.n.name, NodeAddress: s.n.addr,
		Partitions: s.f.partitions}, nil
}

func (s *fakeWorkerNode) DeregisterWorker(ctx context.Context, req *dexv1.DeregisterWorkerRequest) (*dexv1.DeregisterWorkerResponse, error) {
	if err := s.gate(); err != nil {
		return nil, err
	}
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	if s.f.deregisterErr != nil {
		return nil, s.f.deregisterErr
	}
	s.f.deregistered = append(s.f.deregistered, req.WorkerId)
	s.f.note("deregister@" + s.n.name)
	return &dexv1.DeregisterWorkerResponse{}, nil
}

func (s *fakeWorkerNode) PollTask(ctx context.Context, req *dexv1.PollTaskRequest) (*dexv1.PollTaskResponse, error) {
	if err := s.gate(); err != nil {
		return nil, err
	}
	part, asked := partitionOf(ctx), int(req.MaxTasks)
	s.f.mu.Lock()
	s.f.polls = append(s.f.polls, part)
	s.f.longestWait = max(s.f.longestWait, req.WaitMs)
	if s.f.pollsOut[part] > 0 {
		s.f.doubled = append(s.f.doubled, fmt.Sprintf("poll %d, partition %q", len(s.f.polls), part))
	}
	s.f.pollsOut[part]++
	out := 0
	for _, n := range s.f.pollsOut {
		out += n
	}
	s.f.mostPollsOut = max(s.f.mostPollsOut, out)
	s.f.book(asked, fmt.Sprintf("poll of %d tasks, partition %q", asked, part))
	handed := 0
	defer func() {
		s.f.mu.Lock()
		s.f.pollsOut[part]--
		s.f.book(handed-asked, "")
		s.f.mu.Unlock()
	}()
	if s.f.downPartitions[part] {
		s.f.mu.Unlock()
		return nil, status.Errorf(codes.Unavailable, "partition %s has no leader", part)
	}
	if s.f.unknownPolls > 0 {
		s.f.unknownPolls--
		s.f.note("poll refused@" + s.n.name)
		s.f.mu.Unlock()
		return nil, status.Errorf(codes.FailedPrecondition, "worker %q is not registered: register first", req.WorkerId)
	}
	s.f.mu.Unlock()
	deadline := time.Now().Add(time.Duration(req.WaitMs) * time.Millisecond)
	for {
		if s.gate() != nil {
			return &dexv1.PollTaskResponse{}, nil // lost the lease meanwhile
		}
		s.f.mu.Lock()
		if out := s.f.take(part, int(max(req.MaxTasks, 1))); len(out) > 0 {
			handed = len(out)
			s.f.note(fmt.Sprintf("poll %d@%s", len(out), s.n.name))
			s.f.mu.Unlock()
			return &dexv1.PollTaskResponse{Tasks: out}, nil
		}
		s.f.mu.Unlock()
		if time.Now().After(deadline) || ctx.Err() != nil {
			return &dexv1.PollTaskResponse{}, nil
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (s *fakeWorkerNode) ClaimTask(ctx context.Context, req *dexv1.ClaimTaskRequest) (*dexv1.ClaimTaskResponse, error) {
	if err := s.gate(); err != nil {
		return nil, err
	}
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	s.f.claims = append(s.f.claims, proto.Clone(req.Ref).(*dexv1.AttemptRef))
	s.f.note(fmt.Sprintf("claim %d@%s", req.Ref.Seq, s.n.name))
	return &dexv1.ClaimTaskResponse{}, nil
}

func (s *fakeWorkerNode) Heartbeat(ctx context.Context, req *dexv1.HeartbeatRequest) (*dexv1.HeartbeatResponse, error) {
	if err := s.gate(); err != nil {
		return nil, err
	}
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	s.f.note(fmt.Sprintf("hb %d@%s", req.Ref.Seq, s.n.name))
	if s.f.hbCancelled {
		return &dexv1.HeartbeatResponse{Cancelled: true, Reason: "worker declared dead"}, nil
	}
	return &dexv1.HeartbeatResponse{}, nil
}

// ReportTask is the only way the Worker library ends an attempt; the fake
// serves no CompleteTask or FailTask, so a call to them fails the test.
func (s *fakeWorkerNode) ReportTask(ctx context.Context, req *dexv1.ReportTaskRequest) (*dexv1.ReportTaskResponse, error) {
	if err := s.gate(); err != nil {
		return nil, err
	}
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	if req.GetResult().GetFailure() != nil {
		s.f.book(-1, "")
		s.f.fails = append(s.f.fails, proto.Clone(req).(*dexv1.ReportTaskRequest))
		s.f.note(fmt.Sprintf("fail %d@%s", req.Ref.Seq, s.n.name))
		return &dexv1.ReportTaskResponse{}, nil
	}
	s.f.completes = append(s.f.completes, proto.Clone(req).(*dexv1.ReportTaskRequest))
	s.f.note(fmt.Sprintf("complete %d@%s", req.Ref.Seq, s.n.name))
	if s.f.completeUnavailable > 0 {
		s.f.completeUnavailable--
		return nil, status.Error(codes.Unavailable, "leader lost")
	}
	s.f.book(-1, "")
	return &dexv1.ReportTaskResponse{}, nil
}

// startWorkerNodes starts count fake nodes sharing f; the first one serves.
func startWorkerNodes(t *testing.T, f *fakeWorkers, count int) []*node {
	var nodes []*node
	for i := range count {
		wn := &fakeWorkerNode{f: f}
		n := startNode(t, string(rune('A'+i)), wn, nil)
		wn.n = n
		nodes = append(nodes, n)
	}
	nodes[0].setServing(true)
	return nodes
}

func target(nodes []*node) string {
	s := "dex:///"
	for i, n := range nodes {
		if i > 0 {
			s += ","
		}
		s += n.addr
	}
	return s
}

// runWorker dials nodes and runs a Worker until the test ends.
func runWorker(t *testing.T, nodes []*node, opts WorkerOptions) {
	t.Helper()
	conn, err := Dial(target(nodes))
	if err != nil {
		t.Fatal(err)
	}
	if opts.ID == "" {
		opts.ID = "w1"
	}
	opts.PollWait = 100 * time.Millisecond
	opts.CallTimeout = time.Second
	opts.ShutdownGrace = time.Second
	w, err := NewWorker(conn, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		_ = conn.Close()
	})
}

func toolTask(step, tool string, access dexv1.ToolAccess) *dexv1.Task {
	kind := dexv1.StepKind_STEP_KIND_CALL_TOOL
	if access == dexv1.ToolAccess_TOOL_ACCESS_SINGLE_ATTEMPT {
		kind = dexv1.StepKind_STEP_KIND_CALL_SINGLE_ATTEMPT_TOOL
	}
	return &dexv1.Task{
		Ref:       &dexv1.AttemptRef{StepId: step, Attempt: 1, Token: "tok-" + step},
		SessionId: "s1", Kind: kind, Tool: tool, CallId: "c-" + step, Arguments: `{}`,
		Runner: dexv1.TaskRunner_TASK_RUNNER_TOOL, Handler: dexv1.TaskHandler_TASK_HANDLER_TOOL,
		IdempotencyKey: "dex:s1:c-" + step, Access: access, HeartbeatIntervalMs: 20, HeartbeatTimeoutMs: 1000,
	}
}
