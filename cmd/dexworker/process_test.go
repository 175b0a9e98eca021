//go:build e2e

package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// miniCluster is a fake lease holder that runs one demo turn: a RunModel,
// then a task per tool call of its output, then the answering RunModel.
type miniCluster struct {
	dexv1.UnimplementedWorkerServiceServer
	mu       sync.Mutex
	queue    []*dexv1.Task
	history  []*dexv1.HistoryEntry
	pending  int
	answered string
	steps    int
}

func (m *miniCluster) modelTask() *dexv1.Task {
	m.steps++
	return &dexv1.Task{
		Ref: &dexv1.AttemptRef{StepId: "m" + string(rune('0'+m.steps)), Attempt: 1, Token: "t"}, SessionId: "s1",
		Kind: dexv1.StepKind_STEP_KIND_RUN_MODEL, HeartbeatIntervalMs: 50,
		Runner: dexv1.TaskRunner_TASK_RUNNER_MODEL, Handler: dexv1.TaskHandler_TASK_HANDLER_MODEL,
		ModelInput: &dexv1.ModelInput{History: append([]*dexv1.HistoryEntry(nil), m.history...)},
	}
}

func (m *miniCluster) RegisterWorker(context.Context, *dexv1.RegisterWorkerRequest) (*dexv1.RegisterWorkerResponse, error) {
	return &dexv1.RegisterWorkerResponse{HeartbeatIntervalMs: 50, HeartbeatTimeoutMs: 2000}, nil
}

func (m *miniCluster) PollTask(ctx context.Context, req *dexv1.PollTaskRequest) (*dexv1.PollTaskResponse, error) {
	deadline := time.Now().Add(time.Duration(req.WaitMs) * time.Millisecond)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		m.mu.Lock()
		if len(m.queue) > 0 {
			n := min(len(m.queue), int(max(req.MaxTasks, 1)))
			out := m.queue[:n]
			m.queue = m.queue[n:]
			m.mu.Unlock()
			return &dexv1.PollTaskResponse{Tasks: out}, nil
		}
		m.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
	return &dexv1.PollTaskResponse{}, nil
}

func (m *miniCluster) ClaimTask(context.Context, *dexv1.ClaimTaskRequest) (*dexv1.ClaimTaskResponse, error) {
	return &dexv1.ClaimTaskResponse{}, nil
}

func (m *miniCluster) Heartbeat(context.Context, *dexv1.HeartbeatRequest) (*dexv1.HeartbeatResponse, error) {
	return &dexv1.HeartbeatResponse{}, nil
}

func (m *miniCluster) ReportTask(ctx context.Context, req *dexv1.ReportTaskRequest) (*dexv1.ReportTaskResponse, error) {
	if req.GetResult().GetFailure() != nil {
		return nil, status.Error(codes.Unimplemented, "the demo turn fails no attempt")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if mo := req.GetResult().GetModelOutput(); mo != nil {
		m.history = append(m.history, &dexv1.HistoryEntry{Seq: uint64(len(m.history) + 1), Kind: dexv1.HistoryKind_HISTORY_KIND_ASSISTANT, Text: mo.Text, ToolCalls: mo.ToolCalls})
		if len(mo.ToolCalls) == 0 {
			m.answered = mo.Text
		}
		access := map[string]dexv1.ToolAccess{"lookup": dexv1.ToolAccess_TOOL_ACCESS_READ, "save_note": dexv1.ToolAccess_TOOL_ACCESS_IDEMPOTENT_WRITE, "send_email": dexv1.ToolAccess_TOOL_ACCESS_SINGLE_ATTEMPT}
		for _, c := range mo.ToolCalls {
			m.pending++
			m.queue = append(m.queue, &dexv1.Task{
				Ref: &dexv1.AttemptRef{StepId: "tool-" + c.CallId, Attempt: 1, Token: "t"}, SessionId: "s1",
				Kind: dexv1.StepKind_STEP_KIND_CALL_TOOL, Runner: dexv1.TaskRunner_TASK_RUNNER_TOOL, Handler: dexv1.TaskHandler_TASK_HANDLER_TOOL,
				Tool: c.Tool, CallId: c.CallId, Arguments: c.Arguments,
				IdempotencyKey: "dex:s1:" + c.CallId, Access: access[c.Tool], HeartbeatIntervalMs: 50,
			})
		}
		return &dexv1.ReportTaskResponse{}, nil
	}
	m.history = append(m.history, &dexv1.HistoryEntry{Seq: uint64(len(m.history) + 1), Kind: dexv1.HistoryKind_HISTORY_KIND_TOOL_RESULT, Text: req.GetResult().GetToolResult().GetContent()})
	if m.pending--; m.pending == 0 {
		m.queue = append(m.queue, m.modelTask())
	}
	return &dexv1.ReportTaskResponse{}, nil
}

func TestProcessRunsADemoTurnWithAHold(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "dexworker")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mc := &miniCluster{history: []*dexv1.HistoryEntry{{Seq: 1, Kind: dexv1.HistoryKind_HISTORY_KIND_USER, Text: "demo"}}}
	mc.queue = []*dexv1.Task{mc.modelTask()}
	srv := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus("dex.v1.WorkerService", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	dexv1.RegisterWorkerServiceServer(srv, mc)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	ledger := filepath.Join(dir, "ledger.jsonl")
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "--addr", "dex:///"+lis.Addr().String(), "--ledger", ledger, "--hold", "before-model", "--poll-wait", "200ms")
	cmd.Stderr = &syncWriter{w: &stderr}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()

	waitFile(t, ledger+".held", "before-model step=m1")
	if err := cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		mc.mu.Lock()
		answered := mc.answered
		mc.mu.Unlock()
		if answered != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the turn did not end; stderr:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v; stderr:\n%s", err, stderr.String())
	}
	var tools []string
	for _, e := range readLedger(t, ledger) {
		tools = append(tools, e.Tool)
		if e.PID != cmd.Process.Pid {
			t.Fatalf("pid %d", e.PID)
		}
	}
	got := strings.Join(tools, ",")
	if !strings.HasPrefix(got, "model,") || !strings.HasSuffix(got, ",model") || len(tools) != 5 ||
		!strings.Contains(got, "lookup") || !strings.Contains(got, "save_note") || !strings.Contains(got, "send_email") {
		t.Fatalf("ledger tools %s", got)
	}
	if !strings.Contains(stderr.String(), "held before-model step=m1") {
		t.Fatalf("no held line on stderr:\n%s", stderr.String())
	}
	if _, err := os.Stat(ledger + ".held"); !os.IsNotExist(err) {
		t.Fatal("held file left behind")
	}
}

type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
