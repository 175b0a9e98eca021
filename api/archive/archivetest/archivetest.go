// Package archivetest starts a one-node Dex cluster in the test's process
// and fills a session with what an archive holds, for the tests of the
// archive and of its exports.
package archivetest

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/dexhq/dex/api/server"
	"github.com/dexhq/dex/cluster"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// Cluster is a one-node cluster serving gRPC on loopback at Addr.
type Cluster struct {
	t    testing.TB
	ctx  context.Context
	Node *cluster.Node
	Conn *grpc.ClientConn
	Addr string
	// nowMs is the time of the last command: commands carry a time that
	// never goes back, and may jump ahead to a retry's backoff.
	nowMs int64
}

// Start opens the node, waits until it serves clients and stops it when
// the test ends.
func Start(t testing.TB) *Cluster {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	raftAddr := freeAddr(t)
	cfg := cluster.Config{
		ID: "n1", DataDir: t.TempDir(), RaftAddr: raftAddr, GRPCAddr: lis.Addr().String(),
		Peers:            []cluster.Peer{{ID: "n1", RaftAddr: raftAddr}},
		HeartbeatTimeout: 500 * time.Millisecond, ElectionTimeout: 500 * time.Millisecond,
		StepDownTimeout: 250 * time.Millisecond, CommitTimeout: 5 * time.Millisecond,
	}
	node, err := cluster.Open(cfg, cluster.Hooks{})
	if err != nil {
		lis.Close()
		t.Fatal(err)
	}
	srv := server.New(node, zap.NewNop(), server.Options{})
	go srv.Serve(lis)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(func() {
		cancel()
		srv.Stop(time.Second)
		_ = node.Shutdown()
	})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if ok, _ := node.Ready(); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the node never became ready")
		}
	}
	conn, err := grpc.NewClient(cfg.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &Cluster{t: t, ctx: ctx, Node: node, Conn: conn, Addr: cfg.GRPCAddr}
}

func freeAddr(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Propose commits cmd and fails the test if it is refused.
func (c *Cluster) Propose(cmd *fsmpb.Command) *fsm.Result {
	c.t.Helper()
	c.nowMs = max(c.nowMs, time.Now().UnixMilli())
	cmd.NowMs = c.nowMs
	res, err := c.Node.Propose(c.ctx, cmd)
	if err == nil && res.Err != nil {
		err = res.Err
	}
	if err != nil {
		c.t.Fatalf("%T: %v", cmd.Body, err)
	}
	return res
}

// Busy makes session id with a history of several GetSession pages (over
// 1 MiB), Steps of every turn with a failed and a succeeded attempt, a tool
// call, events of which the oldest were dropped by the event retention, and
// a message waiting in the inbox behind a running turn.
func (c *Cluster) Busy(id string, turns int) {
	c.t.Helper()
	c.Propose(&fsmpb.Command{Body: &fsmpb.Command_SetEventRetention{SetEventRetention: &fsmpb.SetEventRetention{Epoch: c.Node.Epoch(), Retention: &fsmpb.EventRetention{Count: 20}}}})
	c.Propose(&fsmpb.Command{Body: &fsmpb.Command_RegisterWorker{RegisterWorker: &fsmpb.RegisterWorker{
		WorkerId: "w1", RunsModel: true, Tools: []*fsmpb.ToolSpec{{Name: "grep", Access: fsmpb.ToolAccess_TOOL_ACCESS_READ}},
	}}})
	big := strings.Repeat("x", 300<<10)
	c.Propose(&fsmpb.Command{Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{SessionId: id, MessageId: "m0", Message: "first " + big}}})
	for turn := range turns {
		if turn > 0 {
			c.Propose(&fsmpb.Command{Body: &fsmpb.Command_SendMessage{SendMessage: &fsmpb.SendMessage{SessionId: id, MessageId: fmt.Sprint("m", turn), Text: fmt.Sprint("turn ", turn, " ", big)}}})
		}
		c.run(id, fsmpb.StepKind_STEP_KIND_RUN_MODEL, &fsmpb.AttemptResult{Outcome: &fsmpb.AttemptResult_Failure{Failure: &fsmpb.AttemptFailure{
			ErrorType: fsmpb.ErrorType_ERROR_TYPE_RATE_LIMIT, Error: "slow down",
		}}})
		call := fmt.Sprint("c", turn)
		c.run(id, fsmpb.StepKind_STEP_KIND_RUN_MODEL, &fsmpb.AttemptResult{Outcome: &fsmpb.AttemptResult_ModelOutput{ModelOutput: &fsmpb.ModelOutput{
			Text: "looking", ToolCalls: []*fsmpb.ToolCall{{CallId: call, Tool: "grep", Arguments: `{"q":"x"}`}},
		}}})
		c.run(id, fsmpb.StepKind_STEP_KIND_CALL_TOOL, &fsmpb.AttemptResult{Outcome: &fsmpb.AttemptResult_ToolResult{ToolResult: &fsmpb.ToolResult{Content: "found " + call}}})
		c.run(id, fsmpb.StepKind_STEP_KIND_RUN_MODEL, &fsmpb.AttemptResult{Outcome: &fsmpb.AttemptResult_ModelOutput{ModelOutput: &fsmpb.ModelOutput{Text: "done"}}})
	}
	// A turn that runs, and a message behind it in the inbox.
	c.Propose(&fsmpb.Command{Body: &fsmpb.Command_SendMessage{SendMessage: &fsmpb.SendMessage{SessionId: id, MessageId: "late1", Text: "one more"}}})
	c.Propose(&fsmpb.Command{Body: &fsmpb.Command_SendMessage{SendMessage: &fsmpb.SendMessage{SessionId: id, MessageId: "late2", Text: "and another"}}})
}

// Idle makes a small idle session id: one turn answered.
func (c *Cluster) Idle(id string) {
	c.t.Helper()
	c.Propose(&fsmpb.Command{Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{SessionId: id, MessageId: id + "/first", Message: "hello"}}})
	c.run(id, fsmpb.StepKind_STEP_KIND_RUN_MODEL, &fsmpb.AttemptResult{Outcome: &fsmpb.AttemptResult_ModelOutput{ModelOutput: &fsmpb.ModelOutput{Text: "hi"}}})
}

// run starts the next attempt of the session's queued Step of kind as
// Worker w1 and reports res.
func (c *Cluster) run(id string, kind fsmpb.StepKind, res *fsmpb.AttemptResult) {
	c.t.Helper()
	var step *fsmpb.Step
	for _, st := range c.Node.State().Steps(id) {
		if st.Kind == kind && st.Status == fsmpb.StepStatus_STEP_STATUS_QUEUED {
			step = st
		}
	}
	if step == nil {
		c.t.Fatalf("session %s has no queued %v Step", id, kind)
	}
	n := uint32(len(step.Attempts) + 1)
	c.nowMs = max(c.nowMs, step.ReadyAtMs) // past a retry's backoff
	started := c.Propose(&fsmpb.Command{Body: &fsmpb.Command_StartAttempt{StartAttempt: &fsmpb.StartAttempt{StepId: step.Id, Attempt: n, WorkerId: "w1", Epoch: c.Node.Epoch()}}})
	c.Propose(&fsmpb.Command{Body: &fsmpb.Command_ReportAttempt{ReportAttempt: &fsmpb.ReportAttempt{
		Ref: &fsmpb.AttemptRef{StepId: step.Id, Attempt: n, Token: started.Attempt.Token, Seq: 1}, Result: res,
	}}})
}

// Close answers every turn session id has queued or will start for its
// inbox, then closes it with a retention of an hour: a closed session
// with all its parts.
func (c *Cluster) Close(id string) {
	c.t.Helper()
	for c.queued(id, fsmpb.StepKind_STEP_KIND_RUN_MODEL) {
		c.run(id, fsmpb.StepKind_STEP_KIND_RUN_MODEL, &fsmpb.AttemptResult{Outcome: &fsmpb.AttemptResult_ModelOutput{ModelOutput: &fsmpb.ModelOutput{Text: "done"}}})
	}
	c.Propose(&fsmpb.Command{Body: &fsmpb.Command_CloseSession{CloseSession: &fsmpb.CloseSession{SessionId: id, RetentionMs: time.Hour.Milliseconds()}}})
}

// queued reports whether session id has a queued Step of kind.
func (c *Cluster) queued(id string, kind fsmpb.StepKind) bool {
	for _, st := range c.Node.State().Steps(id) {
		if st.Kind == kind && st.Status == fsmpb.StepStatus_STEP_STATUS_QUEUED {
			return true
		}
	}
	return false
}

// Fold puts keep_turn_steps keep in force and folds every session's turns
// it no longer keeps the Steps of, as the leader's folding service does.
func (c *Cluster) Fold(keep uint64) {
	c.t.Helper()
	c.Propose(&fsmpb.Command{Body: &fsmpb.Command_SetTurnFolding{SetTurnFolding: &fsmpb.SetTurnFolding{Epoch: c.Node.Epoch(), KeepTurnSteps: keep}}})
	for after := ""; ; {
		ids, next := c.Node.State().FoldSweep(after, fsm.MaxFoldSessions)
		if len(ids) > 0 {
			c.Propose(&fsmpb.Command{Body: &fsmpb.Command_FoldTurns{FoldTurns: &fsmpb.FoldTurns{Epoch: c.Node.Epoch(), SessionIds: ids, MaxSteps: 5}}})
		}
		if after = next; after == "" {
			break
		}
	}
	for {
		ids := c.Node.State().FoldDue(fsm.MaxFoldSessions)
		if len(ids) == 0 {
			return
		}
		c.Propose(&fsmpb.Command{Body: &fsmpb.Command_FoldTurns{FoldTurns: &fsmpb.FoldTurns{Epoch: c.Node.Epoch(), SessionIds: ids, MaxSteps: 5}}})
	}
}
