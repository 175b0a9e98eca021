package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/cluster"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// The largest row each limit allows, in every table, survives a snapshot,
// a restart from it, and a backup restored on a fresh node: what a reader
// of a snapshot takes is at least what Apply writes.
func TestLargestRows_SurviveSnapshotRestartAndBackup(t *testing.T) {
	cfg := singleNodeConfig(t)
	node, srv, conn := serveNode(t, cfg, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l := LimitsFor(DefaultMaxPayload)
	d := &driver{t: t, ctx: ctx, node: node, w: NewWorkers(node, nil, noDeadlines{}, WorkerTiming{}), c: dexv1.NewSessionServiceClient(conn)}
	d.propose(&fsmpb.Command{Body: &fsmpb.Command_RegisterWorker{RegisterWorker: &fsmpb.RegisterWorker{
		WorkerId: "w1", RunsModel: true, Tools: []*fsmpb.ToolSpec{{Name: "copy", Access: fsmpb.ToolAccess_TOOL_ACCESS_READ}},
	}}})

	// "big": a message, a model output and three tool results each as
	// large as a request may be; the next model input is over the limit,
	// so the session errors and keeps its turn.
	d.create("big", strings.Repeat("m", l.MaxMessage))
	third := (l.MaxPayload - 64<<10) / 3
	d.report("big", fsmpb.StepKind_STEP_KIND_RUN_MODEL, &dexv1.AttemptResult{Outcome: &dexv1.AttemptResult_ModelOutput{ModelOutput: &dexv1.ModelOutput{
		Text: "copying", ToolCalls: []*dexv1.ToolCall{
			{CallId: "c1", Tool: "copy", Arguments: jsonArg(third)},
			{CallId: "c2", Tool: "copy", Arguments: jsonArg(third)},
			{CallId: "c3", Tool: "copy", Arguments: jsonArg(third)},
		},
	}}})
	for range 3 {
		d.report("big", fsmpb.StepKind_STEP_KIND_CALL_TOOL, &dexv1.AttemptResult{Outcome: &dexv1.AttemptResult_ToolResult{ToolResult: &dexv1.ToolResult{
			Content: strings.Repeat("r", l.MaxPayload-64<<10),
		}}})
	}
	if s := node.State().Session("big"); s.Status != fsmpb.SessionStatus_SESSION_STATUS_ERRORED || s.Turn == nil {
		t.Fatalf("session big is %v with turn %v; want errored, its turn kept", s.Status, s.Turn != nil)
	}

	// "errs": a model error text as large as a request may be.
	d.create("errs", "hi")
	d.report("errs", fsmpb.StepKind_STEP_KIND_RUN_MODEL, &dexv1.AttemptResult{Outcome: &dexv1.AttemptResult_Failure{Failure: &dexv1.AttemptFailure{
		ErrorType: dexv1.ErrorType_ERROR_TYPE_INVALID_REQUEST, Error: strings.Repeat("é", (l.MaxPayload-64<<10)/2),
	}}})
	for _, st := range node.State().Steps("errs") {
		for _, at := range st.Attempts {
			if len(at.Error) > MaxErrorText || !strings.Contains(at.Error, "bytes cut") {
				t.Fatalf("attempt %d of %s keeps an error of %d bytes; want it cut to %d, saying so", at.N, st.Id, len(at.Error), MaxErrorText)
			}
		}
	}

	// "ask": a question as large as a model output may be, a message kept
	// in the inbox while it waits, and the largest answer.
	d.create("ask", "hi")
	d.report("ask", fsmpb.StepKind_STEP_KIND_RUN_MODEL, &dexv1.AttemptResult{Outcome: &dexv1.AttemptResult_ModelOutput{ModelOutput: &dexv1.ModelOutput{
		ToolCalls: []*dexv1.ToolCall{{CallId: "q", Tool: fsm.BuiltinAskUser, Arguments: fmt.Sprintf(`{"question":%q}`, strings.Repeat("q", l.MaxPayload-64<<10))}},
	}}})
	if _, err := d.c.SendMessage(ctx, &dexv1.SendMessageRequest{SessionId: "ask", Text: strings.Repeat("i", l.MaxMessage), IdempotencyKey: "k"}); err != nil {
		t.Fatal(err)
	}
	answer := strings.Repeat("a", l.MaxMessage)
	if _, err := d.c.AnswerQuestion(ctx, &dexv1.AnswerQuestionRequest{StepId: d.queued("ask", fsmpb.StepKind_STEP_KIND_AWAIT_QUESTION_ANSWER, fsmpb.StepStatus_STEP_STATUS_WAITING).Id, Answer: answer + "!"}); err == nil {
		t.Fatal("an answer over the message limit was taken")
	}
	if _, err := d.c.AnswerQuestion(ctx, &dexv1.AnswerQuestionRequest{StepId: d.queued("ask", fsmpb.StepKind_STEP_KIND_AWAIT_QUESTION_ANSWER, fsmpb.StepStatus_STEP_STATUS_WAITING).Id, Answer: answer}); err != nil {
		t.Fatal(err)
	}

	// A record above protobuf's default 4 MiB reader limit is in the state.
	var buf bytes.Buffer
	if err := node.FSM().Snapshot().Persist(&buf); err != nil {
		t.Fatal(err)
	}
	sum, err := fsm.CheckSnapshot(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if sum.Largest <= 4<<20 {
		t.Fatalf("the largest row is %d bytes; the test means to write rows over 4 MiB", sum.Largest)
	}
	want := sessionsDigest(t, node.State())

	// A backup, through the admin API.
	admin := dexv1.NewAdminServiceClient(conn)
	backupFile := saveBackup(t, ctx, admin)

	// A restart from the node's own snapshot (the backup took one).
	srv.Stop(time.Second)
	if err := node.Shutdown(); err != nil {
		t.Fatal(err)
	}
	again, err := cluster.Open(cfg, cluster.Hooks{})
	if err != nil {
		t.Fatalf("restart on %s: %v", cfg.DataDir, err)
	}
	t.Cleanup(func() { _ = again.Shutdown() })
	waitApplied(t, again)
	if got := sessionsDigest(t, again.State()); got != want {
		t.Fatal("the node restarted from its snapshot holds other sessions than it did")
	}

	// The backup restored on a fresh node.
	fresh, _, freshConn := serveSingleNode(t, Options{})
	restoreBackup(t, ctx, dexv1.NewAdminServiceClient(freshConn), backupFile)
	if got := sessionsDigest(t, fresh.State()); got != want {
		t.Fatal("the fresh node restored from the backup holds other sessions than the backup's cluster")
	}
	// Read as the client libraries read: their answers may exceed gRPC's
	// default 4 MiB (a page holds at least one entry).
	got, err := dexv1.NewSessionServiceClient(freshConn).GetSession(ctx, &dexv1.GetSessionRequest{SessionId: "big"}, grpc.MaxCallRecvMsgSize(client.MaxReceive))
	if err != nil || got.Session.Status != dexv1.SessionStatus_SESSION_STATUS_ERRORED {
		t.Fatalf("session big on the fresh node: %v, %v", got, err)
	}
}

// driver plays a Worker against one node: it starts the queued Step of a
// kind and reports its result.
type driver struct {
	t    *testing.T
	ctx  context.Context
	node *cluster.Node
	w    *Workers
	c    dexv1.SessionServiceClient
}

func (d *driver) propose(cmd *fsmpb.Command) *fsm.Result {
	d.t.Helper()
	res, err := d.node.Propose(d.ctx, cmd)
	if err != nil {
		d.t.Fatalf("%T: %v", cmd.Body, err)
	}
	if res.Err != nil {
		d.t.Fatalf("%T: %v", cmd.Body, res.Err)
	}
	return res
}

func (d *driver) create(id, message string) {
	d.t.Helper()
	if _, err := d.c.CreateSession(d.ctx, &dexv1.CreateSessionRequest{SessionId: id, Message: message}); err != nil {
		d.t.Fatal(err)
	}
}

func (d *driver) queued(session string, kind fsmpb.StepKind, status fsmpb.StepStatus) *fsmpb.Step {
	d.t.Helper()
	for _, st := range d.node.State().Steps(session) {
		if st.Kind == kind && st.Status == status {
			return st
		}
	}
	d.t.Fatalf("session %s has no %v Step %v", session, status, kind)
	return nil
}

// report starts the next attempt of the session's queued Step of kind and
// reports res, checking the request fits in --max-payload.
func (d *driver) report(session string, kind fsmpb.StepKind, res *dexv1.AttemptResult) {
	d.t.Helper()
	st := d.queued(session, kind, fsmpb.StepStatus_STEP_STATUS_QUEUED)
	n := uint32(len(st.Attempts) + 1)
	started := d.propose(&fsmpb.Command{Body: &fsmpb.Command_StartAttempt{StartAttempt: &fsmpb.StartAttempt{
		StepId: st.Id, Attempt: n, WorkerId: "w1", Epoch: d.node.Epoch(),
	}}})
	req := &dexv1.ReportTaskRequest{Ref: &dexv1.AttemptRef{StepId: st.Id, Attempt: n, Token: started.Attempt.Token, Seq: 1}, Result: res}
	if size := proto.Size(req); size > DefaultMaxPayload {
		d.t.Fatalf("the test's report is %d bytes, over --max-payload", size)
	}
	if _, err := d.w.ReportTask(d.ctx, req); err != nil {
		d.t.Fatalf("report %v of %s: %v", kind, st.Id, err)
	}
}

func jsonArg(n int) string { return fmt.Sprintf(`{"text":%q}`, strings.Repeat("a", n-12)) }

// sessionsDigest hashes every session with its history, inbox and Steps.
func sessionsDigest(t *testing.T, st *fsm.State) string {
	t.Helper()
	h := sha256.New()
	write := func(m proto.Message) {
		b, err := protojson.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		h.Write(b)
	}
	for _, s := range st.Sessions() {
		write(s)
		hist, _ := st.History(s.Id, 0, 1<<30, 1<<40)
		for _, e := range hist {
			write(e)
		}
		for _, m := range st.Inbox(s.Id, 1<<40) {
			write(m)
		}
		for _, step := range st.Steps(s.Id) {
			write(step)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

func saveBackup(t *testing.T, ctx context.Context, admin dexv1.AdminServiceClient) []byte {
	t.Helper()
	stream, err := admin.SaveSnapshot(ctx, &dexv1.SaveSnapshotRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return b.Bytes()
		}
		if err != nil {
			t.Fatalf("save a backup: %v", err)
		}
		b.Write(chunk.Data)
	}
}

func restoreBackup(t *testing.T, ctx context.Context, admin dexv1.AdminServiceClient, file []byte) {
	t.Helper()
	stream, err := admin.RestoreSnapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	first := true
	for len(file) > 0 {
		n := min(len(file), snapshotChunk)
		req := &dexv1.RestoreSnapshotRequest{Data: file[:n]}
		if first {
			req.AllowOtherCluster, first = true, false
		}
		if err := stream.Send(req); err != nil {
			t.Fatal(err)
		}
		file = file[n:]
	}
	if _, err := stream.CloseAndRecv(); err != nil {
		t.Fatalf("restore the backup on a fresh node: %v", err)
	}
}

func waitApplied(t *testing.T, n *cluster.Node) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if ok, _ := n.Ready(); ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the restarted node never became ready")
		}
	}
}
