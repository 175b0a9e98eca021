package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// A complete Worker: it runs the model (here a stand-in that calls one tool
// and then answers) and serves one tool, an idempotent write, until SIGINT or
// SIGTERM. Every tool call of a model output needs a call id, unique within
// the output.
func ExampleWorker() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	// Every node of the cluster: the channel follows the one that holds the
	// dispatch lease, through takeovers.
	conn, err := client.Dial("dex:///127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103")
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	saveNote := client.Tool{
		Spec: &dexv1.ToolSpec{
			Name:        "save_note",
			Description: `Saves a note. Arguments: {"text": "..."}`,
			// The same idempotency key comes with every attempt of a call.
			Access: dexv1.ToolAccess_TOOL_ACCESS_IDEMPOTENT_WRITE,
		},
		Run: func(ctx context.Context, call client.ToolCall) (client.ToolResult, error) {
			var args struct {
				Text string `json:"text"`
			}
			if err := json.Unmarshal([]byte(call.Arguments), &args); err != nil {
				// An answer, not a failed attempt: the model sees it.
				return client.ToolResult{Content: "bad arguments: " + err.Error(), IsError: true}, nil
			}
			// Store args.Text under call.IdempotencyKey, so a retry writes it once.
			return client.ToolResult{Content: "saved"}, nil
		},
	}

	model := client.ModelFuncs{
		Run: func(ctx context.Context, in client.ModelInput) (*dexv1.ModelOutput, error) {
			// A real handler sends in.History and in.Tools to a provider and
			// returns its answer; an error fails the attempt with the type
			// client.ClassifyError gives it (see docs/model-errors.md).
			last := in.History[len(in.History)-1]
			if last.Kind == dexv1.HistoryKind_HISTORY_KIND_TOOL_RESULT {
				return &dexv1.ModelOutput{Text: "Noted: " + last.Text}, nil
			}
			return &dexv1.ModelOutput{
				Text: "Saving that.",
				ToolCalls: []*dexv1.ToolCall{{
					CallId:    "call-1",
					Tool:      "save_note",
					Arguments: fmt.Sprintf(`{"text": %q}`, last.Text),
				}},
			}, nil
		},
		CompactFunc: func(ctx context.Context, in client.ModelInput) (string, error) {
			return fmt.Sprintf("%d earlier entries", len(in.History)), nil
		},
	}

	w, err := client.NewWorker(conn, client.WorkerOptions{
		ID:    "worker-1",
		Model: model,
		Tools: []client.Tool{saveNote},
	})
	if err != nil {
		log.Fatal(err)
	}
	// Run returns when ctx ends, after letting running tasks finish.
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}
}

// A client starts a session with a message, follows its events until the
// turn ends, and reads the answer.
func ExampleClient() {
	ctx := context.Background()
	conn, err := client.Dial("dex:///127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103")
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	c := client.New(conn)

	// A session id chosen here makes CreateSession safe to retry.
	s, err := c.CreateSession(ctx, &dexv1.CreateSessionRequest{
		SessionId: client.NewSessionID(),
		Message:   "Remember to water the plants.",
	})
	if err != nil {
		log.Fatal(err)
	}
	errTurnDone := errors.New("turn done")
	err = c.WatchSession(ctx, s.Id, 0, func(e *dexv1.Event) error {
		if e.Type == "turn_completed" || e.Type == "session_errored" || e.Type == "session_paused" {
			return errTurnDone
		}
		return nil
	})
	if err != nil && !errors.Is(err, errTurnDone) {
		log.Fatal(err)
	}
	got, err := c.GetSession(ctx, s.Id)
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range got.Session.History {
		fmt.Println(e.Kind, e.Text)
	}
}

// NewWorker checks its options before anything is sent: a tool needs a
// handler (and a policy, which the cluster checks when it registers).
func ExampleNewWorker() {
	conn, err := client.Dial("dex:///127.0.0.1:7101")
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	_, err = client.NewWorker(conn, client.WorkerOptions{
		Tools: []client.Tool{{Spec: &dexv1.ToolSpec{Name: "lookup", Access: dexv1.ToolAccess_TOOL_ACCESS_READ}}},
	})
	fmt.Println(err)
	// Output: tool "lookup" has no handler
}
