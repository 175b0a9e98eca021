package server

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// A worker token bound to one Worker acts only as that Worker: it cannot
// register or poll as another, nor claim or complete another's attempt.
func TestACL_AWorkerTokenCannotActForAnotherWorker(t *testing.T) {
	node, _, conn := aclNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	clientSecret := addToken(t, node, "t-client", dexv1.TokenRole_TOKEN_ROLE_CLIENT, "")
	w1 := addToken(t, node, "t-w1", dexv1.TokenRole_TOKEN_ROLE_WORKER, "w1")
	w2 := addToken(t, node, "t-w2", dexv1.TokenRole_TOKEN_ROLE_WORKER, "w2")
	workers := dexv1.NewWorkerServiceClient(conn)

	if _, err := workers.RegisterWorker(withBearer(ctx, w1), &dexv1.RegisterWorkerRequest{WorkerId: "w2", RunsModel: true}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("w1's token registering as w2: %v; want PermissionDenied", err)
	}
	if node.State().Worker("w2") != nil {
		t.Fatal("the refused registration registered w2")
	}
	if _, err := workers.PollTask(withBearer(ctx, w1), &dexv1.PollTaskRequest{WorkerId: "w2"}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("w1's token polling as w2: %v; want PermissionDenied", err)
	}
	for id, secret := range map[string]string{"w1": w1, "w2": w2} {
		if _, err := workers.RegisterWorker(withBearer(ctx, secret), &dexv1.RegisterWorkerRequest{WorkerId: id, RunsModel: true}); err != nil {
			t.Fatalf("register %s with its own token: %v", id, err)
		}
	}

	// The cluster hands the session's RunModel to w2.
	if _, err := dexv1.NewSessionServiceClient(conn).CreateSession(withBearer(ctx, clientSecret), &dexv1.CreateSessionRequest{SessionId: "s", Message: "go"}); err != nil {
		t.Fatal(err)
	}
	queued := node.State().StepsWithStatus(fsmpb.StepStatus_STEP_STATUS_QUEUED)
	if len(queued) != 1 {
		t.Fatalf("%d queued steps; want the RunModel", len(queued))
	}
	res, err := node.Propose(ctx, &fsmpb.Command{Body: &fsmpb.Command_StartAttempt{StartAttempt: &fsmpb.StartAttempt{
		StepId: queued[0].Id, Attempt: 1, WorkerId: "w2", Epoch: node.Epoch(),
	}}})
	if err != nil || res.Err != nil {
		t.Fatalf("start: %v %v", err, res.Err)
	}
	ref := &dexv1.AttemptRef{StepId: queued[0].Id, Attempt: 1, Token: res.Attempt.Token, Seq: 1}
	done := &dexv1.CompleteTaskRequest{Ref: ref, Result: &dexv1.CompleteTaskRequest_ModelOutput{ModelOutput: &dexv1.ModelOutput{Text: "stolen"}}}

	// w1 knows the attempt token (as a rogue Worker might) and is still refused.
	if _, err := workers.ClaimTask(withBearer(ctx, w1), &dexv1.ClaimTaskRequest{Ref: ref}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("w1 claiming w2's attempt: %v; want PermissionDenied", err)
	}
	if _, err := workers.CompleteTask(withBearer(ctx, w1), done); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("w1 completing w2's attempt: %v; want PermissionDenied", err)
	}
	other := &dexv1.AttemptRef{StepId: queued[0].Id, Attempt: 2, Token: "x", Seq: 1}
	if _, err := workers.Heartbeat(withBearer(ctx, w1), &dexv1.HeartbeatRequest{Ref: other}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("w1 heartbeating an attempt that does not exist: %v; want PermissionDenied", err)
	}
	at := node.State().Step(ref.StepId).Attempts[0]
	if at.Status != fsmpb.AttemptStatus_ATTEMPT_STATUS_RUNNING || at.ClaimedAtMs != 0 {
		t.Fatalf("after w1's refused calls the attempt is %v; want it running and unclaimed", at)
	}

	// w2's own token completes it.
	if _, err := workers.CompleteTask(withBearer(ctx, w2), done); err != nil {
		t.Fatalf("w2 completing its attempt: %v", err)
	}
	if at := node.State().Step(ref.StepId).Attempts[0]; at.Status != fsmpb.AttemptStatus_ATTEMPT_STATUS_SUCCEEDED {
		t.Fatalf("attempt after w2's complete: %v", at)
	}
}
