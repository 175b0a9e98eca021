package fsm

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/dexhq/dex/api/wirerules"
	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/fsm/store"
)

const (
	maxIDLength = wirerules.MaxIDLength
)

func validID(what, id string) *Rejection {
	if id == "" {
		return reject(CodeInvalid, "%s is required", what)
	}
	if len(id) > maxIDLength {
		return reject(CodeInvalid, "%s is longer than %d bytes", what, maxIDLength)
	}
	return nil
}

func (a *applier) createSession(c *fsmpb.CreateSession) *Result {
	if r := CheckID("session id", c.SessionId); r != nil {
		return rejected(r)
	}
	if old := a.storedSession(c.SessionId); old != nil {
		if deleted(old) {
			return rejected(reject(CodeAlreadyExists, "session %q was deleted and its rows are still being removed: use another id", c.SessionId))
		}
		if importing(old) {
			return rejected(reject(CodeAlreadyExists, "session %q is being imported", c.SessionId))
		}
		return rejected(reject(CodeAlreadyExists, "session %q already exists", c.SessionId))
	}
	var parent *fsmpb.Session
	if c.ParentId != "" {
		p, r := a.session(c.ParentId)
		if r != nil {
			return rejected(reject(CodeNotFound, "parent session %q not found", c.ParentId))
		}
		if r := refuseClosing(p, "children"); r != nil {
			return rejected(reject(CodeFailedPrecondition, "parent %s", r.Reason))
		}
		parent = p
	}
	agent, r := sessionAgent(c, parent)
	if r != nil {
		return rejected(r)
	}
	var retention *int64
	if c.RetentionMs != nil {
		if r := checkRetention("retention_ms", *c.RetentionMs); r != nil {
			return rejected(r)
		}
		retention = proto.Int64(*c.RetentionMs)
	}
	if c.Message != "" {
		if r := CheckKey("message id", c.MessageId); r != nil {
			return rejected(r)
		}
	}
	s := &fsmpb.Session{
		Id:                  c.SessionId,
		ParentId:            c.ParentId,
		Status:              fsmpb.SessionStatus_SESSION_STATUS_IDLE,
		CompactionThreshold: c.CompactionThreshold,
		NextStep:            1,
		NextTurn:            1,
		NextHistory:         1,
		NextInbox:           1,
		CreatedAtMs:         a.now,
		MaxModelInput:       c.MaxModelInput,
		Agent:               agent,
		RetentionMs:         retention,
		Budget:              c.Budget.CloneVT(),
	}
	if r := dispatchOrder(s, c, parent); r != nil {
		return rejected(r)
	}
	if len(c.Labels) > 0 {
		labels, r := withLabels(nil, c.Labels, nil)
		if r != nil {
			return rejected(r)
		}
		s.Labels = labels
	}
	a.emit(s.Id, "session_created", "", c.ParentId)
	if c.Message != "" {
		a.receive(s, &fsmpb.InboxMessage{Id: c.MessageId, Text: c.Message, ReceivedAtMs: a.now, Trace: ValidTrace(c.Trace)})
	}
	a.putSession(s)
	return &Result{SessionID: s.Id}
}

func (a *applier) sendMessage(c *fsmpb.SendMessage) *Result {
	s, r := a.session(c.SessionId)
	if r != nil {
		return rejected(r)
	}
	if r := CheckKey("message id", c.MessageId); r != nil {
		return rejected(r)
	}
	if c.Text == "" {
		return rejected(reject(CodeInvalid, "message text is empty"))
	}
	if a.accepted(s.Id, c.MessageId) {
		return &Result{SessionID: s.Id, Replayed: true}
	}
	if r := refuseClosing(s, "messages"); r != nil {
		return rejected(r)
	}
	a.receive(s, &fsmpb.InboxMessage{Id: c.MessageId, Text: c.Text, FromSession: c.FromSession, ReceivedAtMs: a.now, Trace: ValidTrace(c.Trace)})
	a.putSession(s)
	return &Result{SessionID: s.Id}
}

// receive puts a message in the inbox and starts a turn if the session is free.
func (a *applier) receive(s *fsmpb.Session, m *fsmpb.InboxMessage) {
	a.pushInbox(s, m)
	a.emit(s.Id, "message_received", "", m.Id)
	switch {
	case s.Status == fsmpb.SessionStatus_SESSION_STATUS_ERRORED && s.Turn != nil:
		// A kept turn is retried, not replaced: the message waits for the
		// next turn, and a rejection still counts toward the pause.
		a.emit(s.Id, "session_resumed", "", "message")
		a.retryKeptTurn(s)
	case s.Status == fsmpb.SessionStatus_SESSION_STATUS_IDLE, s.Status == fsmpb.SessionStatus_SESSION_STATUS_ERRORED:
		a.startTurn(s)
	}
}

// startTurn consumes the inbox into the history and queues the turn's first
// Step: CompactContext when the history is over the threshold, else RunModel.
func (a *applier) startTurn(s *fsmpb.Session) {
	if closing(s) {
		return // its messages stay in the inbox, unanswered
	}
	if msg := beforeTurn(s); msg != "" {
		a.pauseWith(s, fsmpb.PauseReason_PAUSE_REASON_BUDGET, msg) // the inbox waits for the resume
		return
	}
	boundary := s.NextHistory // the turn's own messages start here
	t := &fsmpb.Turn{Number: s.NextTurn, Input: fsmpb.TurnInput_TURN_INPUT_MESSAGES, FirstHistorySeq: boundary, StartedAtMs: a.now}
	s.NextTurn++
	for _, m := range a.drainInbox(s) {
		t.MessageIds = append(t.MessageIds, m.Id)
		if t.Trace == nil {
			t.Trace = m.Trace.CloneVT()
		}
		a.appendHistory(s, &fsmpb.HistoryEntry{
			Kind: fsmpb.HistoryKind_HISTORY_KIND_USER, Text: m.Text, MessageId: m.Id, FromSession: m.FromSession,
		})
	}
	s.Turn = t
	s.Status = fsmpb.SessionStatus_SESSION_STATUS_RUNNING
	s.ResumeAtMs = 0
	a.emit(s.Id, "turn_started", "", fmt.Sprint(t.Number))
	if s.CompactionThreshold > 0 && modelInputSize(a.tx, s) > s.CompactionThreshold && hasHistoryBefore(a.tx, s, boundary) {
		t.StepId = a.queueStep(s, &fsmpb.Step{Kind: fsmpb.StepKind_STEP_KIND_COMPACT_CONTEXT, CompactBefore: boundary})
		return
	}
	a.queueModel(s)
}

// queueModel queues the RunModel Step of the turn in progress.
func (a *applier) queueModel(s *fsmpb.Session) {
	if reason, msg := a.beforeModelCall(s); msg != "" {
		s.Turn.StepId = ""
		a.pauseWith(s, reason, msg) // the turn is kept: a resume runs this model call
		return
	}
	s.Status = fsmpb.SessionStatus_SESSION_STATUS_RUNNING
	st := &fsmpb.Step{Kind: fsmpb.StepKind_STEP_KIND_RUN_MODEL}
	s.Turn.StepId = a.queueStep(s, st)
	// An input no Worker could be handed fails the turn now, with a reason
	// the user sees, rather than expiring attempt after attempt.
	if size := modelInputSize(a.tx, s); s.MaxModelInput > 0 && size > s.MaxModelInput {
		msg := fmt.Sprintf("the model input is %d characters, over this session's limit of %d: lower its compaction threshold or edit its history", size, s.MaxModelInput)
		a.modelStepFailed(s, st, fsmpb.ErrorType_ERROR_TYPE_CONTEXT_LENGTH, msg, ErrorTypeName(fsmpb.ErrorType_ERROR_TYPE_CONTEXT_LENGTH)+": "+msg)
	}
}

// queueStep fills in the Step's identity and puts it in the queue (or, for a
// wait, in the waiting state). It returns the Step id.
func (a *applier) queueStep(s *fsmpb.Session, st *fsmpb.Step) string {
	st.Id = StepID(s.Id, s.NextStep)
	st.Number = s.NextStep
	s.NextStep++
	st.SessionId = s.Id
	st.Agent = s.Agent
	if s.Turn != nil {
		st.Turn = s.Turn.Number
		st.Trace = s.Turn.Trace.CloneVT()
	}
	st.CreatedAtMs = a.now
	st.MaxAttempts = Kind(st.Kind).Attempts(st.Policy)
	if st.Status == fsmpb.StepStatus_STEP_STATUS_UNSPECIFIED {
		st.Status = fsmpb.StepStatus_STEP_STATUS_QUEUED
	}
	if st.ReadyAtMs == 0 {
		st.ReadyAtMs = a.now
	}
	m := a.meta()
	m.NextQueueSeq++
	st.QueueSeq = m.NextQueueSeq
	a.putStep(st)
	a.emit(s.Id, "step_queued", st.Id, KindName(st.Kind))
	return st.Id
}

// endTurn closes a turn that answered without tool calls and starts the next
// one if messages are waiting.
func (a *applier) endTurn(s *fsmpb.Session) {
	a.turnEnded(s, s.Turn, "completed")
	s.Turn = nil
	s.TurnsCompleted++
	s.Status = fsmpb.SessionStatus_SESSION_STATUS_IDLE
	a.emit(s.Id, "turn_completed", "", "")
	if s.InboxCount > 0 {
		a.startTurn(s)
	}
}

// tellParent delivers a message from a child session to its parent's inbox.
func (a *applier) tellParent(s *fsmpb.Session, text string) {
	if s.ParentId == "" {
		return
	}
	id := fmt.Sprintf("%s@%d", s.Id, a.index)
	if a.n > 0 { // two commands of one Batch entry may both tell the parent
		id = fmt.Sprintf("%s@%d.%d", s.Id, a.index, a.n)
	}
	if h := a.held; h != nil && h.Id == s.ParentId { // its caller puts it
		if !closing(h) {
			a.receive(h, &fsmpb.InboxMessage{Id: id, Text: text, FromSession: s.Id, ReceivedAtMs: a.now})
		}
		return
	}
	p, r := a.session(s.ParentId)
	if r != nil || closing(p) {
		return // the parent is gone or closed; nobody to tell
	}
	a.receive(p, &fsmpb.InboxMessage{Id: id, Text: text, FromSession: s.Id, ReceivedAtMs: a.now})
	a.putSession(p)
}

func (a *applier) registerWorker(c *fsmpb.RegisterWorker) *Result {
	if r := validID("worker id", c.WorkerId); r != nil {
		return rejected(r)
	}
	seen := map[string]bool{}
	for _, t := range c.Tools {
		if r := validateTool(t); r != nil {
			return rejected(r)
		}
		if seen[t.Name] {
			return rejected(reject(CodeInvalid, "tool %q is registered twice", t.Name))
		}
		seen[t.Name] = true
	}
	if r := checkRegistrationAgents(c); r != nil {
		return rejected(r)
	}
	if r := a.checkCatalog(c.WorkerId, c.Tools); r != nil {
		return rejected(r)
	}
	a.insert(store.TableWorkers, &fsmpb.WorkerInfo{Id: c.WorkerId, Tools: c.Tools, RegisteredAtMs: a.now, RunsModel: c.RunsModel,
		ModelRunTimeoutMs: c.ModelRunTimeoutMs, Agents: c.Agents})
	a.putCatalog(c.WorkerId, c.Tools)
	return &Result{}
}

func validateTool(t *fsmpb.ToolSpec) *Rejection {
	if r := validID("tool name", t.Name); r != nil {
		return r
	}
	if IsBuiltin(t.Name) {
		return reject(CodeInvalid, "tool %q is a built-in and cannot be registered", t.Name)
	}
	switch t.Access {
	case fsmpb.ToolAccess_TOOL_ACCESS_READ, fsmpb.ToolAccess_TOOL_ACCESS_IDEMPOTENT_WRITE, fsmpb.ToolAccess_TOOL_ACCESS_SINGLE_ATTEMPT:
	default:
		return reject(CodeInvalid, "tool %q has no access policy (read, idempotent_write or single_attempt)", t.Name)
	}
	if t.Inline && (t.LongRunning || t.NeedsApproval) {
		return reject(CodeInvalid, "tool %q is inline: it cannot be long running or need approval", t.Name)
	}
	if t.Inline && t.RunTimeoutMs > 0 {
		return reject(CodeInvalid, "tool %q is inline: it runs inside RunModel, so its run timeout is the model's", t.Name)
	}
	if t.MaxAttempts > 100 {
		return reject(CodeInvalid, "tool %q asks for %d attempts; at most 100", t.Name, t.MaxAttempts)
	}
	return nil
}

func (a *applier) setNode(c *fsmpb.SetNode) *Result {
	n := c.GetNode()
	if r := validID("node id", n.GetId()); r != nil {
		return rejected(r)
	}
	if n.RaftAddress == "" {
		return rejected(reject(CodeInvalid, "node %q has no raft address", n.Id))
	}
	a.insert(store.TableNodes, n)
	return &Result{}
}

func (a *applier) removeNode(c *fsmpb.RemoveNode) *Result {
	n := a.tx.Node(c.NodeId)
	if n == nil {
		return rejected(reject(CodeNotFound, "node %q not found", c.NodeId))
	}
	a.delete(store.TableNodes, n)
	return &Result{}
}
