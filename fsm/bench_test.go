package fsm

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/dexhq/dex/fsm/fsmpb"
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
		cmd  *fsmpb.Command
	}{
		{"StartAttempt", &fsmpb.Command{Body: &fsmpb.Command_StartAttempt{StartAttempt: &fsmpb.StartAttempt{StepId: st.Id, Attempt: 1, WorkerId: "w1", Epoch: d.epoch}}}},
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

// BenchmarkApplyBatch is BenchmarkApply with the entries applied as raft
// hands them to a busy node: in batches (here 64 commands of the same type,
// one per session). ns/op and allocs/op are per batch; ns/entry and
// allocs/entry divide them by its size.
func BenchmarkApplyBatch(b *testing.B) {
	const size = 64
	for _, turns := range []int{1, 1000} {
		for _, cmd := range []string{"StartAttempt", "Claim", "Complete"} {
			b.Run(fmt.Sprintf("%s/turns=%d", cmd, turns), func(b *testing.B) {
				d, _ := benchState(b, 1)
				sessions := benchBatchSessions(b, d, turns, size)
				b.ReportAllocs()
				b.StopTimer()
				var m0, m1 runtime.MemStats
				var allocs uint64
				for range b.N {
					phases := d.benchBatchTurn(b, sessions)
					for _, p := range phases {
						if p.name != cmd {
							d.applyBatch(b, p.entries)
							continue
						}
						runtime.ReadMemStats(&m0)
						b.StartTimer()
						d.applyBatch(b, p.entries)
						b.StopTimer()
						runtime.ReadMemStats(&m1)
						allocs += m1.Mallocs - m0.Mallocs
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*size), "ns/entry")
				b.ReportMetric(float64(allocs)/float64(b.N*size), "allocs/entry")
			})
		}
	}
}

// benchBatchSessions returns size sessions of the fixture with turns turns
// each (the 1-turn fixture's sessions; the 1,000-turn ones are grown once).
func benchBatchSessions(b *testing.B, d *driver, turns, size int) []string {
	var out []string
	for i := range size {
		out = append(out, fmt.Sprintf("s%05d", i*(benchSessions/size)))
	}
	if turns > 1 {
		if grown := benchStates[-turns]; grown != nil {
			return grown.hot
		}
		msg := strings.Repeat("m", 512)
		for _, id := range out {
			for range turns - 1 {
				d.send(id, msg)
				d.startNext(id, kRunModel).claim().answer(msg)
			}
		}
		benchStates[-turns] = &benchFixture{d: d, hot: out}
	}
	return out
}

type benchPhase struct {
	name    string
	entries []Entry
}

// benchBatchTurn builds one turn of every session as batches: the messages,
// then the StartAttempts, Claims and Completes (encoded before they run, as
// raft hands them over).
func (d *driver) benchBatchTurn(b *testing.B, sessions []string) []benchPhase {
	msg := strings.Repeat("m", 512)
	var sends []Entry
	for _, id := range sessions {
		msgCounter++
		sends = append(sends, d.entry(b, &fsmpb.Command{Body: &fsmpb.Command_SendMessage{SendMessage: &fsmpb.SendMessage{
			SessionId: id, MessageId: fmt.Sprintf("m%d", msgCounter), Text: msg,
		}}}))
	}
	d.applyBatch(b, sends)
	var starts, claims, completes []Entry
	for _, id := range sessions {
		st := d.step(d.f.State().Session(id).Turn.StepId)
		h := &handle{d: d, st: st.Id, n: 1, tok: AttemptToken(st.Id, 1, d.epoch)}
		starts = append(starts, d.entry(b, &fsmpb.Command{Body: &fsmpb.Command_StartAttempt{StartAttempt: &fsmpb.StartAttempt{StepId: st.Id, Attempt: 1, WorkerId: "w1", Epoch: d.epoch}}}))
		claims = append(claims, d.entry(b, h.claimCmd()))
		completes = append(completes, d.entry(b, h.output(msg)))
	}
	return []benchPhase{{"StartAttempt", starts}, {"Claim", claims}, {"Complete", completes}}
}

func (d *driver) entry(b *testing.B, c *fsmpb.Command) Entry {
	c.NowMs = d.now
	d.index++
	return Entry{Index: d.index, Data: mustEncode(b, c)}
}

func (d *driver) applyBatch(b *testing.B, entries []Entry) {
	for i, res := range d.f.ApplyBatch(entries) {
		if res.Err != nil {
			b.Fatalf("entry %d: %v", entries[i].Index, res.Err)
		}
	}
}

// BenchmarkPredict measures the leader's prediction of the Steps a command
// leaves ready (a message that starts a turn) in the state of BenchmarkApply:
// the cost a command pays, before it is proposed, while a poll waits.
func BenchmarkPredict(b *testing.B) {
	d, hot := benchState(b, 1)
	msg := strings.Repeat("m", 512)
	b.ReportAllocs()
	b.StopTimer()
	for i := range b.N {
		session := hot[i%len(hot)]
		msgCounter++ // b.N starts over in each run: ids must not repeat
		cmd := &fsmpb.Command{NowMs: d.now, Body: &fsmpb.Command_SendMessage{SendMessage: &fsmpb.SendMessage{
			SessionId: session, MessageId: fmt.Sprintf("m%d", msgCounter), Text: msg,
		}}}
		b.StartTimer()
		ready := d.f.Predict(cmd)
		b.StopTimer()
		if len(ready) != 1 {
			b.Fatalf("predicted %d ready Steps; want the turn's RunModel", len(ready))
		}
		d.do(cmd)
		d.startNext(session, kRunModel).claim().answer(msg)
	}
}
