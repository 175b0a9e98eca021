package server

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/lease/stream"
)

type fixedHub struct{ h *stream.Hub }

func (f fixedHub) Hub() *stream.Hub { return f.h }

// A running attempt's output is taken at the offset the hub holds up to and
// relayed; an attempt that does not run, or a wrong token, is told to stop;
// without a hub (this node does not lead) the Worker is told to try again.
func TestAppendOutput(t *testing.T) {
	node, ref := runningModelAttempt(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hub := stream.NewHub(stream.DefaultLimits)
	w := NewWorkers(node, nil, noDeadlines{}, WorkerTiming{})
	w.outputs = fixedHub{hub}
	watch := hub.Watch("s", nil)
	defer watch.Close()

	resp, err := w.AppendOutput(ctx, &dexv1.AppendOutputRequest{Ref: ref, Offset: 0, Text: "Hello"})
	if err != nil || resp.NextOffset != 5 || resp.Stop {
		t.Fatalf("append: %v %v; want next 5", resp, err)
	}
	if d := <-watch.C(); d.Text != "Hello" || d.Step != ref.StepId {
		t.Fatalf("relayed %+v", d)
	}
	if resp, err := w.AppendOutput(ctx, &dexv1.AppendOutputRequest{Ref: ref, Offset: 9, Text: "x"}); err != nil || resp.NextOffset != 5 {
		t.Fatalf("append past the end: %v %v; want next 5 (resend from there)", resp, err)
	}
	wrong := &dexv1.AttemptRef{StepId: ref.StepId, Attempt: ref.Attempt, Token: "not-its-token"}
	if resp, err := w.AppendOutput(ctx, &dexv1.AppendOutputRequest{Ref: wrong, Offset: 5, Text: "x"}); err != nil || !resp.Stop {
		t.Fatalf("a wrong token: %v %v; want stop", resp, err)
	}
	if _, err := w.AppendOutput(ctx, &dexv1.AppendOutputRequest{Offset: 5, Text: "x"}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("no ref: %v; want InvalidArgument", err)
	}
	// Once the attempt ended it takes no more.
	if _, err := w.ReportTask(ctx, &dexv1.ReportTaskRequest{Ref: ref, Result: &dexv1.AttemptResult{Outcome: &dexv1.AttemptResult_ModelOutput{ModelOutput: &dexv1.ModelOutput{Text: "Hello"}}}}); err != nil {
		t.Fatal(err)
	}
	if resp, err := w.AppendOutput(ctx, &dexv1.AppendOutputRequest{Ref: ref, Offset: 5, Text: "!"}); err != nil || !resp.Stop {
		t.Fatalf("after the result: %v %v; want stop", resp, err)
	}
	w.outputs = fixedHub{nil}
	if _, err := w.AppendOutput(ctx, &dexv1.AppendOutputRequest{Ref: ref, Offset: 5, Text: "!"}); status.Code(err) != codes.Unavailable {
		t.Fatalf("without a hub: %v; want Unavailable", err)
	}
}

// One call carries several attempts' output, each answered in order; a
// malformed call (no append, too many, an append without its attempt, the
// same attempt twice) is refused whole and nothing of it is taken.
func TestAppendOutputs(t *testing.T) {
	node, ref := runningModelAttempt(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hub := stream.NewHub(stream.DefaultLimits)
	w := NewWorkers(node, nil, noDeadlines{}, WorkerTiming{})
	w.outputs = fixedHub{hub}
	watch := hub.Watch("s", nil)
	defer watch.Close()
	ended := &dexv1.AttemptRef{StepId: "other-s1", Attempt: 1, Token: "t"}
	appends := func(as ...*dexv1.AppendOutputRequest) *dexv1.AppendOutputsRequest {
		return &dexv1.AppendOutputsRequest{Appends: as}
	}

	refused := map[string]*dexv1.AppendOutputsRequest{
		"no append": appends(),
		"too many":  {Appends: make([]*dexv1.AppendOutputRequest, maxAppends+1)},
		"an append without its attempt": appends(
			&dexv1.AppendOutputRequest{Ref: ref, Text: "Hello"}, &dexv1.AppendOutputRequest{Text: "x"}),
		"the same attempt twice": appends(
			&dexv1.AppendOutputRequest{Ref: ref, Text: "Hello"}, &dexv1.AppendOutputRequest{Ref: ref, Offset: 5, Text: "!"}),
	}
	for name, req := range refused {
		if _, err := w.AppendOutputs(ctx, req); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("%s: %v; want InvalidArgument", name, err)
		}
	}
	select {
	case d := <-watch.C():
		t.Fatalf("a refused call relayed %+v", d)
	default:
	}

	resp, err := w.AppendOutputs(ctx, appends(
		&dexv1.AppendOutputRequest{Ref: ended, Text: "nope"},
		&dexv1.AppendOutputRequest{Ref: ref, Text: "Hello"}))
	if err != nil || len(resp.Answers) != 2 {
		t.Fatalf("append two: %v %v", resp, err)
	}
	if a := resp.Answers[0]; !a.Stop {
		t.Fatalf("an attempt that does not run: %v; want stop", a)
	}
	if a := resp.Answers[1]; a.Stop || a.NextOffset != 5 {
		t.Fatalf("the running attempt: %v; want next 5", a)
	}
	if d := <-watch.C(); d.Text != "Hello" || d.Step != ref.StepId {
		t.Fatalf("relayed %+v", d)
	}
}
