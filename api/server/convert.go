package server

import (
	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// The state machine stores its rows in its own types (fsm/fsmpb); the API
// shows them as dex.v1 types, converted here at its edge.

// apiEvent is a stored event as the API shows it.
// TestAPIEvent_CarriesEveryField fails when either type gains a field.
func apiEvent(e *fsmpb.Event) *dexv1.Event {
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

// apiMessage is a stored inbox message as the API shows it.
// TestAPIMessage_CarriesEveryField fails when either type gains a field.
func apiMessage(m *fsmpb.InboxMessage) *dexv1.Message {
	return &dexv1.Message{
		Id:           m.Id,
		Text:         m.Text,
		FromSession:  m.FromSession,
		ReceivedAtMs: m.ReceivedAtMs,
		SessionId:    m.SessionId,
		Seq:          m.Seq,
	}
}

// apiMessages converts an inbox page.
func apiMessages(ms []*fsmpb.InboxMessage) []*dexv1.Message {
	out := make([]*dexv1.Message, len(ms))
	for i, m := range ms {
		out[i] = apiMessage(m)
	}
	return out
}
