package fsm

import (
	"fmt"
	"strings"
	"testing"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// benchSessions is the size of the state every Apply benchmark runs in.
const benchSessions = 10_000

// BenchmarkApply measures Apply for the three commands on the hot path of
// every Step (StartAttempt, Claim, Complete) in a state of 10,000 sessions,
// on sessions of one turn and on sessions of 1,000 turns (512-byte messages
// and answers). Each iteration runs one whole turn; only the measured
// command is timed. `make bench` runs it with a fixed iteration count.
func BenchmarkApply(b *testing.B) {
	for _, turns := range []int{1, 1000} {
		for _, cmd := range []string{"StartAttempt", "Claim", "Complete"} {
			b.Run(fmt.Sprintf("%s/turns=%d", cmd, turns), func(b *testing.B) {
				d, hot := benchState(b, turns)
				b.ReportAllocs()
				b.StopTimer()
				for i := range b.N {
					d.benchTurn(b, hot[i%len(hot)], cmd)
				}
			})
		}
	}
}

var benchStates = map[int]*benchFixture{}

type benchFixture struct {
	d   *driver
	hot []string
}

// benchState builds (once per turn count) 10,000 one-turn sessions, of which
// the hot ones, the sessions the benchmark runs turns on, have turns turns.
func benchState(b *testing.B, turns int) (*driver, []string) {
	if f := benchStates[turns]; f != nil {
		f.d.t = b
		return f.d, f.hot
	}
	d := newDriver(b)
	msg := strings.Repeat("m", 512)
	var hot []string
	for i := range benchSessions {
		id := fmt.Sprintf("s%05d", i)
		d.createSession(id, "", msg)
		d.startNext(id, kRunModel).claim().answer(msg)
		if i%(benchSessions/16) == 0 {
			hot = append(hot, id)
		}
	}
	for _, id := range hot {
		for range turns - 1 {
			d.send(id, msg)
			d.startNext(id, kRunModel).claim().answer(msg)
		}
	}
	benchStates[turns] = &benchFixture{d: d, hot: hot}
	return d, hot
}

// benchTurn runs one turn of the session and times the command named.
func (d *driver) benchTurn(b *testing.B, session, timed string) {
	msg := strings.Repeat("m", 512)
	d.send(session, msg)
	st := d.step(d.f.State().Session(session).Turn.StepId)
	h := &handle{d: d, st: st.Id, n: 1, tok: AttemptToken(st.Id, 1, d.epoch)}
	cmds := []struct {
		name string
		cmd  *dexv1.Command
	}{
		{"StartAttempt", &dexv1.Command{Body: &dexv1.Command_StartAttempt{StartAttempt: &dexv1.StartAttempt{StepId: st.Id, Attempt: 1, WorkerId: "w1", Epoch: d.epoch}}}},
		{"Claim", h.claimCmd()},
		{"Complete", h.output(msg)},
	}
	for _, c := range cmds {
		c.cmd.NowMs = d.now
		data := mustEncode(b, c.cmd)
		d.index++
		if c.name == timed {
			b.StartTimer()
		}
		res := d.f.ApplyEntry(d.index, data)
		if c.name == timed {
			b.StopTimer()
		}
		if res.Err != nil {
			b.Fatalf("%s: %v", c.name, res.Err)
		}
	}
}
