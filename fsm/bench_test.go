package fsm

import (
	"fmt"
	"testing"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// BenchmarkApply measures Apply for the two commands on the hot path of every
// Step, StartAttempt and Complete, on a state of at least 1,000 sessions.
func BenchmarkApply(b *testing.B) {
	// setup makes n sessions, each with a queued RunModel Step, and starts
	// their attempts when started is set.
	setup := func(b *testing.B, n int, started bool) (*driver, []*dexv1.Step) {
		d := newDriver(b)
		for i := range max(n, 1000) {
			d.createSession(fmt.Sprintf("s%d", i), "", "hello")
		}
		steps := d.f.State().StepsWithStatus(dexv1.StepStatus_STEP_STATUS_QUEUED)[:n]
		if started {
			for i, st := range steps {
				d.start(st)
				steps[i] = d.step(st.Id)
			}
		}
		return d, steps
	}
	run := func(b *testing.B, d *driver, cmds [][]byte) {
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			d.index++
			if res := d.f.ApplyEntry(d.index, cmds[i]); res.Err != nil {
				b.Fatal(res.Err)
			}
		}
	}
	b.Run("StartAttempt", func(b *testing.B) {
		d, steps := setup(b, b.N, false)
		cmds := make([][]byte, b.N)
		for i, st := range steps {
			cmds[i] = mustEncode(b, &dexv1.Command{NowMs: d.now, Body: &dexv1.Command_StartAttempt{StartAttempt: &dexv1.StartAttempt{
				StepId: st.Id, Attempt: 1, WorkerId: "w1", Epoch: d.epoch,
			}}})
		}
		run(b, d, cmds)
	})
	b.Run("Complete", func(b *testing.B) {
		d, steps := setup(b, b.N, true)
		cmds := make([][]byte, b.N)
		for i, st := range steps {
			cmds[i] = mustEncode(b, &dexv1.Command{NowMs: d.now, Body: &dexv1.Command_CompleteAttempt{CompleteAttempt: &dexv1.CompleteAttempt{
				Ref:    &dexv1.AttemptRef{StepId: st.Id, Attempt: 1, Token: st.Attempts[0].Token, Seq: 1},
				Result: &dexv1.CompleteAttempt_ModelOutput{ModelOutput: &dexv1.ModelOutput{Text: "hi", ToolCalls: []*dexv1.ToolCall{{CallId: "c1", Tool: "lookup", Arguments: "{}"}}}},
			}}})
		}
		run(b, d, cmds)
	})
}
