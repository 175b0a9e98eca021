//go:build e2e

package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"go.uber.org/zap"
)

// goldenLedgerFields are the keys every library writes, by phase.
func goldenLedgerFields(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile("../ledger-fields.json")
	if err != nil {
		t.Fatal(err)
	}
	var g map[string][]string
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	return g
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startDexd builds (unless $DEX_BIN has one) and starts a single-node dexd
// on free loopback ports, stopped by its PID at cleanup; it returns the
// gRPC address once the node is ready.
func startDexd(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(os.Getenv("DEX_BIN"), "dexd")
	if os.Getenv("DEX_BIN") == "" {
		bin = filepath.Join(dir, "dexd")
		if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/dexd").CombinedOutput(); err != nil {
			t.Fatalf("build dexd: %v\n%s", err, out)
		}
	}
	raft, grpcAddr, httpAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	log, err := os.Create(filepath.Join(dir, "dexd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--id", "n1", "--data-dir", filepath.Join(dir, "n1"), "--raft-addr", raft,
		"--grpc-addr", grpcAddr, "--http-addr", httpAddr, "--peers", "n1="+raft, "--log-level", "warn",
		"--heartbeat-interval", "300ms", "--heartbeat-timeout", "3s")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() {
		_ = syscall.Kill(pid, syscall.SIGTERM)
		_ = cmd.Wait()
		_ = log.Close()
	})
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if r, err := http.Get("http://" + httpAddr + "/readyz"); err == nil {
			r.Body.Close()
			if r.StatusCode == http.StatusOK {
				return grpcAddr
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("dexd never became ready")
	return ""
}

// A Worker run with $DEX_LEDGER against a real dexd: the model calls a
// write tool that reports its side effect, then answers.
func TestLedgerLinesAgainstDexd(t *testing.T) {
	addr := startDexd(t)
	ledger := filepath.Join(t.TempDir(), "ledger.jsonl")
	t.Setenv(LedgerEnv, ledger)

	conn, err := Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	model := ModelFuncs{Run: func(ctx context.Context, in ModelInput) (*dexv1.ModelOutput, error) {
		for _, h := range in.History {
			if h.Kind == dexv1.HistoryKind_HISTORY_KIND_TOOL_RESULT {
				return &dexv1.ModelOutput{Text: "done"}, nil
			}
		}
		return &dexv1.ModelOutput{ToolCalls: []*dexv1.ToolCall{{CallId: "call-1", Tool: "save_note", Arguments: `{"note":"hi"}`}}}, nil
	}}
	note := writeTool("save_note", func(ctx context.Context, c ToolCall) (ToolResult, error) {
		if err := SideEffect(ctx, "notes.insert", c.IdempotencyKey); err != nil {
			return ToolResult{}, err
		}
		return ToolResult{Content: "saved"}, nil
	})
	w, err := NewWorker(conn, WorkerOptions{ID: "w-ledger", Tools: []Tool{note}, Model: model, PollWait: time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()

	c := New(conn)
	s, err := c.CreateSession(ctx, &dexv1.CreateSessionRequest{SessionId: "ledger-s1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.SendMessage(ctx, s.Id, "save hi", ""); err != nil {
		t.Fatal(err)
	}
	var got *dexv1.GetSessionResponse
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err = c.GetSession(ctx, s.Id)
		if err == nil && got.Session.Status == dexv1.SessionStatus_SESSION_STATUS_IDLE && len(got.Steps) >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("session never ended its turn: %v %v", got, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var toolStep *dexv1.Step
	for _, st := range got.Steps {
		if st.Kind == dexv1.StepKind_STEP_KIND_CALL_TOOL {
			toolStep = st
		}
	}
	if toolStep == nil {
		t.Fatalf("no tool Step in %v", got.Steps)
	}

	lines := readLedgerLines(t, ledger)
	var summary []string
	for _, l := range lines {
		summary = append(summary, fmt.Sprintf("%s %s %s %v", l["phase"], l["kind"], l["tool"], l["outcome"]))
		if l["session"] != s.Id || l["worker"] != "w-ledger" || l["attempt"] != 1.0 || l["pid"] != float64(os.Getpid()) {
			t.Errorf("line %v", l)
		}
	}
	want := []string{
		"start model  <nil>", "end model  ok",
		"start tool save_note <nil>", "effect tool save_note <nil>", "end tool save_note ok",
		"start model  <nil>", "end model  ok",
	}
	if !slices.Equal(summary, want) {
		t.Fatalf("ledger\n%s\nwant\n%s", strings.Join(summary, "\n"), strings.Join(want, "\n"))
	}
	for _, l := range lines[2:5] {
		if l["step"] != toolStep.Id || l["call_id"] != "call-1" || l["idempotency_key"] != toolStep.IdempotencyKey || toolStep.IdempotencyKey == "" {
			t.Errorf("tool line %v, want Step %s key %s", l, toolStep.Id, toolStep.IdempotencyKey)
		}
	}
	if e := lines[3]; e["effect"] != "notes.insert" || e["effect_key"] != toolStep.IdempotencyKey {
		t.Errorf("effect line %v", e)
	}
	if lines[0]["step"] == lines[5]["step"] {
		t.Errorf("both model calls on Step %v", lines[0]["step"])
	}
	checkGoldenFields(t, lines)
}

// checkGoldenFields: each line has exactly the keys of its phase in
// api/ledger-fields.json, the file every library's test reads.
func checkGoldenFields(t *testing.T, lines []map[string]any) {
	t.Helper()
	golden := goldenLedgerFields(t)
	seen := map[string]bool{}
	for _, l := range lines {
		var keys []string
		for k := range l {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		phase, _ := l["phase"].(string)
		seen[phase] = true
		if !slices.Equal(keys, golden[phase]) {
			t.Errorf("%s line keys %v, want %v", phase, keys, golden[phase])
		}
	}
	if len(seen) != 3 {
		t.Errorf("phases seen %v, want start, end and effect", seen)
	}
}
