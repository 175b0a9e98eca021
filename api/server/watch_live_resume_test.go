package server

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/cluster"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/lease/stream"
)

// lateNode is a node's state for a service made before the node opens.
type lateNode struct{ node atomic.Pointer[cluster.Node] }

func (l *lateNode) State() *fsm.State { return l.node.Load().State() }

// A watch that resumes, as after a takeover, the live output of attempts
// that ended before it came back, and of which the leader's hub holds
// nothing, gets output_ended for the one that succeeded and
// output_abandoned for the one that failed, at the offset it sent.
func TestWatchSession_ResumedOutputOfAnEndedAttemptGetsItsEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	src := &lateNode{}
	outputs := stream.NewService(src, stream.DefaultLimits)
	node, _, conn := serveSingleNode(t, Options{Outputs: outputs})
	src.node.Store(node)
	// A new leader's hub: it holds nothing, and its applied stream is not
	// fed here, as if the ends were applied before the watches came back.
	if err := outputs.EstablishLeadership(ctx, 1); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(outputs.RevokeLeadership)
	sessions := dexv1.NewSessionServiceClient(conn)
	if _, err := node.Propose(ctx, &fsmpb.Command{Body: &fsmpb.Command_RegisterWorker{RegisterWorker: &fsmpb.RegisterWorker{WorkerId: "w1", RunsModel: true}}}); err != nil {
		t.Fatal(err)
	}
	ended := modelAttemptOf(ctx, t, node, sessions, "ok")
	report(ctx, t, node, ended, &fsmpb.AttemptResult{Outcome: &fsmpb.AttemptResult_ModelOutput{ModelOutput: &fsmpb.ModelOutput{Text: "whole"}}})
	failed := modelAttemptOf(ctx, t, node, sessions, "bad")
	report(ctx, t, node, failed, &fsmpb.AttemptResult{Outcome: &fsmpb.AttemptResult_Failure{Failure: &fsmpb.AttemptFailure{ErrorType: fsmpb.ErrorType_ERROR_TYPE_INVALID_REQUEST, Error: "refused"}}})

	for session, c := range map[string]struct {
		ref  *fsmpb.AttemptRef
		want string
	}{"ok": {ended, "output_ended"}, "bad": {failed, "output_abandoned"}} {
		watch, err := sessions.WatchSession(ctx, &dexv1.WatchSessionRequest{SessionId: session, LiveOutput: true,
			OutputOffsets: []*dexv1.OutputOffset{{StepId: c.ref.StepId, Attempt: c.ref.Attempt, Offset: 5}}})
		if err != nil {
			t.Fatal(err)
		}
		for {
			ev, err := watch.Recv()
			if err != nil {
				t.Fatalf("%s: the watch ended with %v before its live output's end", session, err)
			}
			if ev.Output == nil {
				continue // the committed events
			}
			if ev.Type != c.want || ev.StepId != c.ref.StepId || ev.Output.Attempt != c.ref.Attempt || ev.Output.Offset != 5 || ev.Seq != 0 {
				t.Fatalf("%s: the live output event is %v; want %s of attempt %d of %s at 5", session, ev, c.want, c.ref.Attempt, c.ref.StepId)
			}
			break
		}
	}
}

// modelAttemptOf creates a session and starts its RunModel Step's attempt 1.
func modelAttemptOf(ctx context.Context, t *testing.T, node *cluster.Node, sessions dexv1.SessionServiceClient, id string) *fsmpb.AttemptRef {
	t.Helper()
	if _, err := sessions.CreateSession(ctx, &dexv1.CreateSessionRequest{SessionId: id, Message: "go"}); err != nil {
		t.Fatal(err)
	}
	var step *fsmpb.Step
	for _, st := range node.State().Steps(id) {
		if st.Status == fsmpb.StepStatus_STEP_STATUS_QUEUED {
			step = st
		}
	}
	if step == nil {
		t.Fatalf("session %s has no queued Step", id)
	}
	res, err := node.Propose(ctx, &fsmpb.Command{Body: &fsmpb.Command_StartAttempt{StartAttempt: &fsmpb.StartAttempt{
		StepId: step.Id, Attempt: 1, WorkerId: "w1", Epoch: node.Epoch(),
	}}})
	if err != nil || res.Err != nil {
		t.Fatalf("start: %v %v", err, res.Err)
	}
	return &fsmpb.AttemptRef{StepId: step.Id, Attempt: 1, Token: res.Attempt.Token}
}

// report ends an attempt with its Worker's first report.
func report(ctx context.Context, t *testing.T, node *cluster.Node, ref *fsmpb.AttemptRef, result *fsmpb.AttemptResult) {
	t.Helper()
	ref = &fsmpb.AttemptRef{StepId: ref.StepId, Attempt: ref.Attempt, Token: ref.Token, Seq: 1}
	res, err := node.Propose(ctx, &fsmpb.Command{Body: &fsmpb.Command_ReportAttempt{ReportAttempt: &fsmpb.ReportAttempt{Ref: ref, Result: result}}})
	if err != nil || res.Err != nil {
		t.Fatalf("report: %v %v", err, res.Err)
	}
}
