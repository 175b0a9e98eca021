//go:build e2e

package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// A session of 2,000 turns of 512-byte messages keeps running on real
// processes: with --max-payload 64 KiB it compacts at 8 KiB, so no RunModel
// input ever nears the 32 KiB limit; every model call succeeds at its first
// attempt, and the session still reads whole, page by page: its last 20
// turns with their Steps, the older ones folded.
func TestLongSession_TwoThousandTurnsKeepRunningUnderTheLimit(t *testing.T) {
	const turns = 2000
	e := newEnv(t, "--max-payload", fmt.Sprint(64<<10))
	answer, _ := json.Marshal(strings.Repeat("a", 512))
	e.startWorker(`{"default":[{"text":` + string(answer) + `}]}`)
	msg := strings.Repeat("m", 512)

	id := e.createSession(msg)
	completed := make(chan struct{}, turns)
	ctx, stop := context.WithCancel(e.ctx(10 * time.Minute))
	defer stop()
	go e.client.WatchSession(ctx, id, 0, func(ev *dexv1.Event) error {
		if ev.Type == "turn_completed" {
			completed <- struct{}{}
		}
		return nil
	})
	for i := 1; i <= turns; i++ {
		select {
		case <-completed:
		case <-time.After(30 * time.Second):
			r := e.get(id)
			t.Fatalf("turn %d did not complete: session %s, last error %q", i, r.Session.Status, r.Session.LastError)
		}
		if i < turns {
			if _, err := e.client.SendMessage(e.ctx(20*time.Second), id, msg, fmt.Sprintf("k%d", i)); err != nil {
				t.Fatalf("message %d: %v", i, err)
			}
		}
	}

	// The leader folds the Steps of every turn but the last 20 (dexd's
	// default --keep-turn-steps) within a few of its one-second rounds.
	r := e.get(id)
	for deadline := time.Now().Add(30 * time.Second); r.Session.FoldedThroughTurn < turns-20; r = e.get(id) {
		if time.Now().After(deadline) {
			t.Fatalf("the session folded its Steps through turn %d only; want %d", r.Session.FoldedThroughTurn, turns-20)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The whole read joins pages read one after the other: the one that saw
	// the last fold may hold Steps from a page read before it. Folding is
	// done now (turn 1,980 is the last owed), so a read from here is whole.
	r = e.get(id)
	s := r.Session
	if s.TurnsCompleted != turns || s.TurnsFailed != 0 || s.Status != dexv1.SessionStatus_SESSION_STATUS_IDLE {
		t.Fatalf("after %d turns: %d completed, %d failed, %s (last error %q)", turns, s.TurnsCompleted, s.TurnsFailed, s.Status, s.LastError)
	}
	if s.Summaries == 0 {
		t.Fatal("the history was never compacted")
	}
	models := 0
	for _, st := range r.Steps {
		if st.Turn <= s.FoldedThroughTurn {
			t.Fatalf("step %s of turn %d is kept; the session folded through turn %d", st.Id, st.Turn, s.FoldedThroughTurn)
		}
		if st.Kind != dexv1.StepKind_STEP_KIND_RUN_MODEL && st.Kind != dexv1.StepKind_STEP_KIND_COMPACT_CONTEXT {
			continue
		}
		models++
		if st.Outcome != dexv1.Outcome_OUTCOME_SUCCEEDED || len(st.Attempts) != 1 {
			t.Fatalf("%s step %s: %s after %d attempts (%s)", st.Kind, st.Id, st.Outcome, len(st.Attempts), st.Result)
		}
	}
	// The folded turns keep what their Steps were: one attempt each, none
	// failed, and every turn is read back either folded or with its Steps.
	if len(r.FoldedTurns) != int(s.FoldedThroughTurn) {
		t.Fatalf("GetSession read %d folded turns; the session folded through turn %d", len(r.FoldedTurns), s.FoldedThroughTurn)
	}
	folded := uint64(0)
	for _, f := range r.FoldedTurns {
		folded += uint64(f.Steps)
		if f.FailedSteps != 0 || f.Attempts != f.Steps || f.LastOutcome != dexv1.Outcome_OUTCOME_SUCCEEDED {
			t.Fatalf("folded turn %d: %v", f.Turn, f)
		}
		for _, k := range f.Kinds {
			if k.Kind == dexv1.StepKind_STEP_KIND_RUN_MODEL || k.Kind == dexv1.StepKind_STEP_KIND_COMPACT_CONTEXT {
				models += int(k.Steps)
			}
		}
	}
	if folded != s.FoldedSteps || folded+uint64(len(r.Steps)) != s.NextStep-1 {
		t.Fatalf("%d Steps folded and %d kept; the session counts %d folded of %d", folded, len(r.Steps), s.FoldedSteps, s.NextStep-1)
	}
	if models != turns+int(s.Summaries) {
		t.Fatalf("%d model Steps; want one RunModel per turn and one CompactContext per summary (%d)", models, turns+int(s.Summaries))
	}
	// Every entry is read back: the user messages, the answers, the summaries.
	if got, want := len(s.History), 2*turns+int(s.Summaries); got != want || uint64(got) != s.HistoryCount {
		t.Fatalf("the session reads %d history entries (it keeps %d); want %d", got, s.HistoryCount, want)
	}
	// The model is sent the summary and what came after it, never more than
	// the limit: a compaction threshold of 8 KiB and a turn of 1 KiB.
	if s.MaxModelInput != 32<<10 || s.CompactionThreshold != 8<<10 {
		t.Fatalf("session limits %d/%d; want the 64 KiB cluster's 32 KiB input and 8 KiB threshold", s.MaxModelInput, s.CompactionThreshold)
	}
}
