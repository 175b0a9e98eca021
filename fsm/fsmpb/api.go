package fsmpb

import (
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// The state machine stores its rows in these types; the API and the Worker
// protocol show them as dex.v1 types, converted here. Each pair has the same
// fields under the same numbers (api_test.go fails when one gains a field the
// other, or its conversion, lacks), so snapshots written when the state
// stored the dex.v1 types restore unchanged. A nil row converts to nil.

// API is the event as the API shows it.
func (e *Event) API() *dexv1.Event {
	if e == nil {
		return nil
	}
	return &dexv1.Event{
		Seq:       e.Seq,
		SessionId: e.SessionId,
		Type:      e.Type,
		StepId:    e.StepId,
		Detail:    e.Detail,
		AtMs:      e.AtMs,
		Ordinal:   e.Ordinal,
	}
}

// API is the inbox message as the API shows it.
func (m *InboxMessage) API() *dexv1.Message {
	if m == nil {
		return nil
	}
	return &dexv1.Message{
		Id:           m.Id,
		Text:         m.Text,
		FromSession:  m.FromSession,
		ReceivedAtMs: m.ReceivedAtMs,
		SessionId:    m.SessionId,
		Seq:          m.Seq,
	}
}

// API is the history entry as the API and a RunModel task show it.
func (h *HistoryEntry) API() *dexv1.HistoryEntry {
	if h == nil {
		return nil
	}
	return &dexv1.HistoryEntry{
		Seq:           h.Seq,
		Kind:          dexv1.HistoryKind(h.Kind),
		Text:          h.Text,
		CallId:        h.CallId,
		Tool:          h.Tool,
		Arguments:     h.Arguments,
		Outcome:       dexv1.Outcome(h.Outcome),
		ToolCalls:     convertAll(h.ToolCalls, (*ToolCall).API),
		InlineResults: convertAll(h.InlineResults, (*InlineResult).API),
		StepId:        h.StepId,
		MessageId:     h.MessageId,
		FromSession:   h.FromSession,
		AtMs:          h.AtMs,
		SessionId:     h.SessionId,
		CumSize:       h.CumSize,
	}
}

// HistoryAPI converts a page of history entries.
func HistoryAPI(hs []*HistoryEntry) []*dexv1.HistoryEntry {
	return convertAll(hs, (*HistoryEntry).API)
}

// InboxAPI converts a page of inbox messages.
func InboxAPI(ms []*InboxMessage) []*dexv1.Message {
	return convertAll(ms, (*InboxMessage).API)
}

// API is the Step as the API shows it (without a waiting reason, which the
// API fills on reads).
func (s *Step) API() *dexv1.Step {
	if s == nil {
		return nil
	}
	return &dexv1.Step{
		Id:             s.Id,
		SessionId:      s.SessionId,
		Turn:           s.Turn,
		Kind:           dexv1.StepKind(s.Kind),
		CallId:         s.CallId,
		Tool:           s.Tool,
		Arguments:      s.Arguments,
		Policy:         s.Policy.API(),
		IdempotencyKey: s.IdempotencyKey,
		TaskId:         s.TaskId,
		Status:         dexv1.StepStatus(s.Status),
		ReadyAtMs:      s.ReadyAtMs,
		DueAtMs:        s.DueAtMs,
		Attempts:       convertAll(s.Attempts, (*Attempt).API),
		Outcome:        dexv1.Outcome(s.Outcome),
		Result:         s.Result,
		IsError:        s.IsError,
		CreatedAtMs:    s.CreatedAtMs,
		QueueSeq:       s.QueueSeq,
		Prompt:         s.Prompt,
		EndedAtMs:      s.EndedAtMs,
		MaxAttempts:    s.MaxAttempts,
		ErrorType:      dexv1.ErrorType(s.ErrorType),
		Number:         s.Number,
		CompactBefore:  s.CompactBefore,
		Agent:          s.Agent,
	}
}

// API is the session's header as the API shows it; GetSession fills in a
// page of its history and inbox.
func (s *Session) API() *dexv1.Session {
	if s == nil {
		return nil
	}
	return &dexv1.Session{
		Id:                  s.Id,
		ParentId:            s.ParentId,
		Status:              dexv1.SessionStatus(s.Status),
		History:             HistoryAPI(s.History),
		Inbox:               InboxAPI(s.Inbox),
		Turn:                s.Turn.API(),
		CompactionThreshold: s.CompactionThreshold,
		RejectedTurns:       s.RejectedTurns,
		PauseReason:         dexv1.PauseReason(s.PauseReason),
		PauseMessage:        s.PauseMessage,
		LastErrorType:       dexv1.ErrorType(s.LastErrorType),
		LastError:           s.LastError,
		ErrorEpisode:        s.ErrorEpisode,
		EpisodeResumes:      s.EpisodeResumes,
		ResumeAtMs:          s.ResumeAtMs,
		NextStep:            s.NextStep,
		NextTurn:            s.NextTurn,
		NextHistory:         s.NextHistory,
		CreatedAtMs:         s.CreatedAtMs,
		UpdatedAtMs:         s.UpdatedAtMs,
		Summaries:           s.Summaries,
		CompactedBefore:     s.CompactedBefore,
		TurnsCompleted:      s.TurnsCompleted,
		TurnsFailed:         s.TurnsFailed,
		SeenMessageIds:      s.SeenMessageIds,
		HistorySize:         s.HistorySize,
		HistoryCount:        s.HistoryCount,
		InboxCount:          s.InboxCount,
		NextInbox:           s.NextInbox,
		LatestSummarySeq:    s.LatestSummarySeq,
		MaxModelInput:       s.MaxModelInput,
		Agent:               s.Agent,
	}
}

// API is the token as the API shows it: without its secret's hash, which
// the API's type does not have.
func (t *AclToken) API() *dexv1.AclToken {
	if t == nil {
		return nil
	}
	return &dexv1.AclToken{
		Id:          t.Id,
		Name:        t.Name,
		Role:        dexv1.TokenRole(t.Role),
		WorkerId:    t.WorkerId,
		CreatedAtMs: t.CreatedAtMs,
		Revoked:     t.Revoked,
		RevokedAtMs: t.RevokedAtMs,
	}
}
