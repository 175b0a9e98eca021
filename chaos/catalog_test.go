//go:build e2e

package chaos

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/chaos/harness"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// The tool catalog and the Worker lifecycle with real processes: one policy
// per tool, Workers deregistered after their TTL, and queued Steps of a tool
// nobody serves failed after the tool wait.

var emailRead5 = &dexv1.ToolSpec{Name: "send_email", Access: dexv1.ToolAccess_TOOL_ACCESS_READ, MaxAttempts: 5}

// waitRegistered waits for the dexworker's "registered with leader" line.
func (e *env) waitRegistered(w *harness.Worker) {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(w.Log(), `"registered with leader `) {
		if time.Now().After(deadline) || !w.Running() {
			e.t.Fatalf("%s did not register: %s", w.Name, harness.Tail(w.Log(), 5))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (e *env) register(id string, tools ...*dexv1.ToolSpec) error {
	_, err := dexv1.NewWorkerServiceClient(e.conn).RegisterWorker(e.ctx(10*time.Second), &dexv1.RegisterWorkerRequest{WorkerId: id, Tools: tools})
	return err
}

func TestCatalog_AStaleRegistrationCannotChangeALiveToolsPolicy(t *testing.T) {
	e := newEnv(t)
	w := e.startWorker("")
	e.waitRegistered(w)
	err := e.register("stale", emailRead5)
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("registering send_email as a read over a live single-attempt one: %v; want FailedPrecondition", err)
	}
	for _, want := range []string{w.Name, "stale", "single_attempt", "read with 5 attempts"} {
		if !strings.Contains(status.Convert(err).Message(), want) {
			t.Fatalf("refusal %q does not name %q", status.Convert(err).Message(), want)
		}
	}
	// The demo session still calls send_email once, as a single attempt.
	id := e.createSession("demo")
	r := e.waitStatus(id, sIdle, 30*time.Second)
	sends := stepsBy(r, kSingle, "send_email")
	if len(sends) != 1 || sends[0].MaxAttempts != 1 || sends[0].Outcome != dexv1.Outcome_OUTCOME_SUCCEEDED {
		t.Fatalf("send_email steps:\n%s", describe(r.Steps))
	}
	if n := toolCalls(e.ledgerEntries(), id)[sends[0].CallId]; n != 1 {
		t.Fatalf("send_email ran %d times; want 1", n)
	}
}

// callsOnce is a model that calls the tool named by the session's first
// message, then answers once the result is in.
func callsOnce(_ context.Context, in client.ModelInput) (*dexv1.ModelOutput, error) {
	tool := ""
	for _, h := range in.History {
		switch h.Kind {
		case dexv1.HistoryKind_HISTORY_KIND_TOOL_RESULT:
			return &dexv1.ModelOutput{Text: "done"}, nil
		case dexv1.HistoryKind_HISTORY_KIND_USER:
			if tool == "" {
				tool = strings.TrimPrefix(h.Text, "call ")
			}
		}
	}
	return &dexv1.ModelOutput{ToolCalls: []*dexv1.ToolCall{{CallId: "c1", Tool: tool, Arguments: "{}"}}}, nil
}

// runWorker runs a Worker of the Go library in the test until it ends.
func (e *env) runWorker(o client.WorkerOptions) {
	e.t.Helper()
	o.PollWait = time.Second
	w, err := client.NewWorker(e.conn, o)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	e.t.Cleanup(func() { cancel(); <-done })
}

func TestCatalog_AKilledWorkerIsDeregisteredAndItsToolsStepsFailUnlessAnotherWorkerComes(t *testing.T) {
	// The TTL outlives a first attempt that the leader hands to the killed
	// Worker's last poll (it expires after the 3 s heartbeat timeout): the
	// model must call the tools while their Worker is still registered.
	e := newEnv(t, "--worker-ttl", "8s", "--tool-wait", "4s")
	w := e.startWorker("")
	e.waitRegistered(w)
	e.runWorker(client.WorkerOptions{ID: "model", Model: client.ModelFuncs{Run: callsOnce}})

	w.Kill()
	lookup := e.createSession("call lookup")
	note := e.createSession("call save_note")
	queuedTool := func(tool string) func(*dexv1.GetSessionResponse) bool {
		return func(r *dexv1.GetSessionResponse) bool { return len(stepsBy(r, kCallTool, tool)) == 1 }
	}
	for id, tool := range map[string]string{lookup: "lookup", note: "save_note"} {
		r := e.waitFor(id, 20*time.Second, tool+" queued", queuedTool(tool))
		if st := stepsBy(r, kCallTool, tool)[0]; st.Status != dexv1.StepStatus_STEP_STATUS_QUEUED {
			t.Fatalf("%s is not queued while its dead Worker is still registered:\n%s", tool, describe(r.Steps))
		}
	}

	// The killed Worker's registration lives until its TTL: a policy other
	// than its own is refused, then accepted once it is deregistered.
	if err := e.register("probe", emailRead5); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("registration over the killed Worker's send_email right after the kill: %v; want FailedPrecondition", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for err := e.register("probe", emailRead5); err != nil; err = e.register("probe", emailRead5) {
		if status.Code(err) != codes.FailedPrecondition || time.Now().After(deadline) {
			t.Fatalf("the killed Worker was not deregistered: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// Another Worker comes for save_note: its Step runs. Nobody comes for
	// lookup: its Step fails as an unknown tool that never ran.
	e.runWorker(client.WorkerOptions{ID: "notes", Tools: []client.Tool{{
		Spec: &dexv1.ToolSpec{Name: "save_note", Access: dexv1.ToolAccess_TOOL_ACCESS_IDEMPOTENT_WRITE},
		Run: func(context.Context, client.ToolCall) (client.ToolResult, error) {
			return client.ToolResult{Content: "saved"}, nil
		},
	}}})
	r := e.waitStatus(note, sIdle, 30*time.Second)
	st := stepsBy(r, kCallTool, "save_note")[0]
	if st.Outcome != dexv1.Outcome_OUTCOME_SUCCEEDED || st.Attempts[len(st.Attempts)-1].WorkerId != "notes" {
		t.Fatalf("save_note did not run on the Worker that came:\n%s", describe(r.Steps))
	}
	r = e.waitStatus(lookup, sIdle, 30*time.Second)
	st = stepsBy(r, kCallTool, "lookup")[0]
	if st.Outcome != dexv1.Outcome_OUTCOME_FAILED || len(st.Attempts) != 0 ||
		!strings.HasPrefix(st.Result, fsm.NotRunPrefix) || !strings.Contains(st.Result, `unknown tool "lookup": no live Worker served it`) {
		t.Fatalf("lookup: %s %q with %d attempts; want failed, not run, unknown tool", fsm.OutcomeName(fsmpb.Outcome(st.Outcome)), st.Result, len(st.Attempts))
	}
	if n := toolCalls(e.ledgerEntries(), lookup)["c1"]; n != 0 {
		t.Fatalf("lookup ran %d times", n)
	}
}
