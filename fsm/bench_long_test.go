package fsm

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/fsm/store"
)

// BenchmarkLongSession shows what a long session costs with its older turns
// folded (keep=20, dexd's default) and without (keep=0): one session of 100
// or 3,000 turns, each a model call with a tool call, the tool and the
// model's answer (512-byte messages), folded after every turn as the
// leader's service would. Apply times one more turn's commands (the
// message, three Steps' start, claim and report, and the fold); GetSession
// times the first page GetSession reads (header, history, Steps, folded
// turns); Restore times restoring the state's snapshot, whose size it
// reports with the Steps' and the history's rows, the events and the
// folded turns' bytes (the history is not folded, so it grows with the
// turns, and the state has no event retention here). Run it with a fixed count (e.g.
// -benchtime 200x) so the session does not grow much while it is measured.
func BenchmarkLongSession(b *testing.B) {
	for _, keep := range []uint64{20, 0} {
		for _, turns := range []int{100, 3000} {
			name := fmt.Sprintf("keep=%d/turns=%d", keep, turns)
			b.Run(name+"/Apply", func(b *testing.B) {
				d := longSession(b, keep, turns, true)
				b.ReportAllocs()
				b.StopTimer()
				for range b.N {
					d.timedTurn(b, "long", keep)
				}
			})
			b.Run(name+"/GetSession", func(b *testing.B) {
				d := longSession(b, keep, turns, false)
				st := d.f.State()
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					if st.Session("long") == nil {
						b.Fatal("no session")
					}
					st.History("long", 0, 500, 1<<20)
					st.StepsPage("long", 0, 500, 1<<20)
					st.FoldedTurns("long", 0, 500)
				}
			})
			b.Run(name+"/Restore", func(b *testing.B) {
				d := longSession(b, keep, turns, false)
				var snap bytes.Buffer
				if err := d.f.Snapshot().Persist(&snap); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				for range b.N {
					if err := New(Options{}).Restore(bytes.NewReader(snap.Bytes())); err != nil {
						b.Fatal(err)
					}
				}
				// After the loop: ResetTimer drops the metrics reported before it.
				b.ReportMetric(float64(snap.Len()), "snapshot-bytes")
				for _, ts := range d.f.State().TableSizes() {
					switch ts.Table {
					case store.TableSteps:
						b.ReportMetric(float64(ts.Rows), "step-rows")
					case store.TableHistory:
						b.ReportMetric(float64(ts.Rows), "history-rows")
						b.ReportMetric(float64(ts.Bytes), "history-bytes")
					case store.TableEvents:
						b.ReportMetric(float64(ts.Rows), "events")
					case store.TableFoldedTurns:
						b.ReportMetric(float64(ts.Bytes), "folded-bytes")
					}
				}
			})
		}
	}
}

var longSessions = map[string]*driver{}

// longSession builds (once per keep and turns) a state of one session of
// turns turns with keep_turn_steps keep, folded after every turn. The
// Apply benchmark adds turns to its own (grows), so the reads see the
// session at turns turns.
func longSession(b *testing.B, keep uint64, turns int, grows bool) *driver {
	key := fmt.Sprint(keep, "/", turns, "/", grows)
	if d := longSessions[key]; d != nil {
		d.t = b
		return d
	}
	d := newDriver(b)
	d.setFolding(keep)
	d.createSession("long", "", "")
	for range turns {
		d.timedTurn(nil, "long", keep)
	}
	if s := d.f.State().Session("long"); keep > 0 && s.FoldedThroughTurn != uint64(turns)-keep {
		b.Fatalf("folded through turn %d; want %d", s.FoldedThroughTurn, uint64(turns)-keep)
	}
	longSessions[key] = d
	return d
}

// timedTurn runs one turn of the session (a tool call and an answer) and,
// with keep, the fold the leader proposes after it; with b it times only
// the commands' Apply.
func (d *driver) timedTurn(b *testing.B, session string, keep uint64) {
	msg := strings.Repeat("m", 512)
	apply := func(c *fsmpb.Command) *Result {
		c.NowMs = d.now
		data, err := Encode(c)
		if err != nil {
			d.t.Fatal(err)
		}
		d.index++
		if b != nil {
			b.StartTimer()
		}
		res := d.f.ApplyEntry(d.index, data)
		if b != nil {
			b.StopTimer()
		}
		if res.Err != nil {
			d.t.Fatalf("%T: %v", c.Body, res.Err)
		}
		return res
	}
	msgCounter++
	apply(&fsmpb.Command{Body: &fsmpb.Command_SendMessage{SendMessage: &fsmpb.SendMessage{SessionId: session, MessageId: fmt.Sprint("k", msgCounter), Text: msg}}})
	run := func(stepID string, res *fsmpb.AttemptResult) {
		at := apply(&fsmpb.Command{Body: &fsmpb.Command_StartAttempt{StartAttempt: &fsmpb.StartAttempt{StepId: stepID, Attempt: 1, WorkerId: "w1", Epoch: d.epoch}}}).Attempt
		ref := &fsmpb.AttemptRef{StepId: stepID, Attempt: 1, Token: at.Token, Seq: 1}
		apply(&fsmpb.Command{Body: &fsmpb.Command_ClaimAttempt{ClaimAttempt: &fsmpb.ClaimAttempt{Ref: ref}}})
		ref = &fsmpb.AttemptRef{StepId: stepID, Attempt: 1, Token: at.Token, Seq: 2}
		apply(&fsmpb.Command{Body: &fsmpb.Command_ReportAttempt{ReportAttempt: &fsmpb.ReportAttempt{Ref: ref, Result: res}}})
	}
	s := d.f.State().Session(session)
	call := fmt.Sprint("c", s.Turn.Number)
	run(s.Turn.StepId, &fsmpb.AttemptResult{Outcome: &fsmpb.AttemptResult_ModelOutput{ModelOutput: &fsmpb.ModelOutput{
		Text: msg, ToolCalls: []*fsmpb.ToolCall{{CallId: call, Tool: "lookup", Arguments: `{"q":"x"}`}}}}})
	s = d.f.State().Session(session)
	run(s.Turn.Calls[0].StepId, &fsmpb.AttemptResult{Outcome: &fsmpb.AttemptResult_ToolResult{ToolResult: &fsmpb.ToolResult{Content: msg}}})
	s = d.f.State().Session(session)
	run(s.Turn.StepId, &fsmpb.AttemptResult{Outcome: &fsmpb.AttemptResult_ModelOutput{ModelOutput: &fsmpb.ModelOutput{Text: msg}}})
	if keep > 0 {
		apply(&fsmpb.Command{Body: &fsmpb.Command_FoldTurns{FoldTurns: &fsmpb.FoldTurns{Epoch: d.epoch, SessionIds: []string{session}, MaxSteps: 256}}})
	}
}
