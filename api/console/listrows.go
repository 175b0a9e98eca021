package console

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// A list row shows the session's first message and what it waits for.
// SessionSummary carries neither, so the console reads the first page of
// each session shown (one history entry, its turn's calls): at most a page
// of the list (sessionsPerPage), a few at a time.

// rowLookups is how many sessions' first pages are read at once.
const rowLookups = 8

// rowView is what a row shows beyond the summary.
type rowView struct {
	First string // the first message ("" when none yet)
	Waits string // what the session waits for
}

// rowViews reads each session's first page; a session that cannot be read
// now (deleted meanwhile, a refusal) shows its summary only.
func (c *Console) rowViews(ctx context.Context, list []*dexv1.SessionSummary) map[string]rowView {
	out := make(map[string]rowView, len(list))
	var mu sync.Mutex
	var wg sync.WaitGroup
	slots := make(chan struct{}, rowLookups)
	for _, s := range list {
		wg.Add(1)
		slots <- struct{}{}
		go func(id string) {
			defer func() { <-slots; wg.Done() }()
			got, err := c.sessions.GetSessionPage(ctx, &dexv1.GetSessionRequest{SessionId: id, HistoryLimit: 1, StepsLimit: 1})
			if err != nil {
				return
			}
			v := rowView{First: firstMessage(got.Session), Waits: waitsFor(got.Session)}
			mu.Lock()
			out[id] = v
			mu.Unlock()
		}(s.Id)
	}
	wg.Wait()
	return out
}

// firstMessage is the text of the session's first entry when it is a
// message, else the first message of its inbox (a turn not started yet).
func firstMessage(s *dexv1.Session) string {
	for _, e := range s.GetHistory() {
		if e.Kind == dexv1.HistoryKind_HISTORY_KIND_USER {
			return e.Text
		}
		break
	}
	for _, m := range s.GetInbox() {
		return m.Text
	}
	return ""
}

// waitsFor says what a session waits for, as its status and turn show it.
func waitsFor(s *dexv1.Session) string {
	switch s.Status {
	case dexv1.SessionStatus_SESSION_STATUS_IDLE:
		return "a message"
	case dexv1.SessionStatus_SESSION_STATUS_CLOSED:
		return "nothing: closed"
	case dexv1.SessionStatus_SESSION_STATUS_PAUSED:
		return "a resume (" + enumName(s.PauseReason.String(), "PAUSE_REASON_") + ")"
	case dexv1.SessionStatus_SESSION_STATUS_ERRORED:
		if s.ResumeAtMs != 0 {
			return "a resume; the cluster retries " + agoMs(s.ResumeAtMs)
		}
		return "a resume"
	}
	var waits, running []string
	for _, cs := range s.GetTurn().GetCalls() {
		switch {
		case cs.Phase == dexv1.CallPhase_CALL_PHASE_AWAITING_APPROVAL:
			waits = append(waits, "approval of "+cs.Tool)
		case cs.Phase == dexv1.CallPhase_CALL_PHASE_DONE:
		case cs.Builtin == "ask_user" || cs.Tool == "ask_user":
			waits = append(waits, "an answer"+question(cs.Arguments))
		case cs.Builtin == "sleep" || cs.Tool == "sleep":
			waits = append(waits, "a timer")
		default:
			running = append(running, cs.Tool)
		}
	}
	switch {
	case len(waits) > 0:
		return strings.Join(waits, ", ")
	case len(running) > 0:
		return "tool " + strings.Join(running, ", ")
	case s.Status == dexv1.SessionStatus_SESSION_STATUS_RUNNING:
		return "the model"
	}
	return ""
}

// question is ask_user's question from its arguments, quoted.
func question(args string) string {
	var a struct {
		Question string `json:"question"`
	}
	if json.Unmarshal([]byte(args), &a) != nil || a.Question == "" {
		return ""
	}
	return fmt.Sprintf(": %q", firstLine(60, a.Question))
}
