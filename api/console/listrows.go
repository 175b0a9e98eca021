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
// The summary carries the first message, and what a session at rest
// (idle, paused, errored, closed) waits for; what a running or waiting
// session waits for is in its turn, so the console reads the first page of
// those sessions only (one history entry, its turn's calls): at most a
// page of the list (sessionsPerPage), a few at a time.

// rowLookups is how many sessions' first pages are read at once.
const rowLookups = 8

// rowView is what a row shows beyond the summary.
type rowView struct {
	First string // the first message ("" when none yet)
	Waits string // what the session waits for
}

// inTurn: the session's wait is in its turn, not in its summary.
func inTurn(st dexv1.SessionStatus) bool {
	return st == dexv1.SessionStatus_SESSION_STATUS_RUNNING || st == dexv1.SessionStatus_SESSION_STATUS_WAITING
}

// rowViews makes each row's view; a session in a turn that cannot be read
// now (deleted meanwhile, a refusal) shows no wait.
func (c *Console) rowViews(ctx context.Context, list []*dexv1.SessionSummary) map[string]rowView {
	out := make(map[string]rowView, len(list))
	var mu sync.Mutex
	var wg sync.WaitGroup
	slots := make(chan struct{}, rowLookups)
	for _, s := range list {
		if !inTurn(s.Status) {
			v := rowView{First: s.FirstMessage, Waits: restWaits(s.Status, s.PauseReason, s.ResumeAtMs)}
			mu.Lock() // the lookups started for earlier rows write out too
			out[s.Id] = v
			mu.Unlock()
			continue
		}
		wg.Add(1)
		slots <- struct{}{}
		go func(s *dexv1.SessionSummary) {
			defer func() { <-slots; wg.Done() }()
			v := rowView{First: s.FirstMessage}
			if got, err := c.sessions.GetSessionPage(ctx, &dexv1.GetSessionRequest{SessionId: s.Id, HistoryLimit: 1, StepsLimit: 1}); err == nil {
				v.Waits = waitsFor(got.Session)
			}
			mu.Lock()
			out[s.Id] = v
			mu.Unlock()
		}(s)
	}
	wg.Wait()
	return out
}

// restWaits says what a session at rest waits for ("" for one in a turn).
func restWaits(st dexv1.SessionStatus, pause dexv1.PauseReason, resumeAtMs int64) string {
	switch st {
	case dexv1.SessionStatus_SESSION_STATUS_IDLE:
		return "a message"
	case dexv1.SessionStatus_SESSION_STATUS_CLOSED:
		return "nothing: closed"
	case dexv1.SessionStatus_SESSION_STATUS_PAUSED:
		return "a resume (" + enumName(pause.String(), "PAUSE_REASON_") + ")"
	case dexv1.SessionStatus_SESSION_STATUS_ERRORED:
		if resumeAtMs != 0 {
			return "a resume; the cluster retries " + agoMs(resumeAtMs)
		}
		return "a resume"
	}
	return ""
}

// waitsFor says what a session waits for, as its status and turn show it.
func waitsFor(s *dexv1.Session) string {
	if !inTurn(s.Status) {
		return restWaits(s.Status, s.PauseReason, s.ResumeAtMs)
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
