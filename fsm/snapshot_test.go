package fsm

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// busyState builds a state with every kind of object and Step in it.
func busyState(t *testing.T) *driver {
	d := newDriver(t)
	d.do(&fsmpb.Command{Body: &fsmpb.Command_SetNode{SetNode: &fsmpb.SetNode{Node: &fsmpb.NodeInfo{Id: "n1", RaftAddress: "127.0.0.1:7001", GrpcAddress: "127.0.0.1:8001"}}}})
	// A long session whose first turn's Steps were folded.
	finishedSession(d, "long", "", 3)
	d.setFolding(2)
	d.do(d.foldCmd(MaxFoldSteps, "long"))
	childWithToolResults(t, d)
	d.startNext("c", kRunModel).answer("", call("q", "ask_user", `{"question":"?"}`), call("t", "sleep", `{"seconds":5}`),
		call("a", "deploy", "{}"), call("b", "build", "{}"), call("e", "send_email", "{}"))
	d.startNext("c", kCallTool).claim().do(func(h *handle) *fsmpb.Command { return h.toolResult("", false, "task-1") })
	d.startNext("c", kSingle).claim()
	d.do(&fsmpb.Command{Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{SessionId: "z", CompactionThreshold: 3, MessageId: "zm", Message: "compact me"}}})
	// A provider held by a rate-limited model call.
	d.createOrdered("held", "", &fsmpb.CreateSession{Provider: "openai", Priority: 5, FairnessKey: "tenant", FairnessWeight: 2})
	d.startNext("held", kRunModel).rateLimited(time.Minute)
	// Agents: a session of bot@1 with its RunModel queued, and w1 running
	// bot@1's model and serving lookup for bot@1 only.
	d.do(&fsmpb.Command{Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{SessionId: "g", Agent: "bot@1", MessageId: "gm", Message: "hi bot"}}})
	tools := []*fsmpb.ToolSpec{proto.Clone(demoTools[0]).(*fsmpb.ToolSpec)}
	tools[0].Agents = []string{"bot@1"}
	tools = append(tools, demoTools[1:]...)
	d.do(&fsmpb.Command{Body: &fsmpb.Command_RegisterWorker{RegisterWorker: &fsmpb.RegisterWorker{WorkerId: "w1", Tools: tools, RunsModel: true, Agents: []string{"bot@1"}}}})
	// A schedule that started one slot's session.
	d.do(putScheduleCmd(intervalSchedule("nightly", d.now, 60_000)))
	d.do(d.fireCmd("nightly", d.now+60_000, d.now+60_000, d.now+120_000))
	return d
}

func persist(t *testing.T, f *FSM) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := f.Snapshot().Persist(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestSnapshot_RestoreGivesAnIdenticalState(t *testing.T) {
	d := busyState(t)
	snap := persist(t, d.f)
	g := New(Options{})
	if err := g.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snap, persist(t, g)) {
		t.Fatal("the restored state persists to different bytes")
	}
	a, b := d.f.State(), g.State()
	if !proto.Equal(a.Meta(), b.Meta()) {
		t.Fatal("meta differs")
	}
	for _, s := range a.Sessions() {
		if !proto.Equal(s, b.Session(s.Id)) {
			t.Fatalf("session %s differs", s.Id)
		}
		for _, st := range a.Steps(s.Id) {
			if !proto.Equal(st, b.Step(st.Id)) {
				t.Fatalf("step %s differs", st.Id)
			}
		}
		if len(a.Events(s.Id, 0)) != len(b.Events(s.Id, 0)) {
			t.Fatalf("events of %s differ", s.Id)
		}
	}
	if len(a.Nodes()) != 1 || len(b.Nodes()) != 1 || len(b.Workers()) != 1 {
		t.Fatal("nodes or workers lost")
	}
	// The agents and the indexes that route by them come back.
	if got := b.Session("g").Agent; got != "bot@1" {
		t.Fatalf("restored session agent %q; want bot@1", got)
	}
	if got := b.QueuedStepsFor(true, "", "bot@1"); len(got) != 1 || got[0].Agent != "bot@1" {
		t.Fatalf("restored queued model Steps of bot@1: %v", got)
	}
	if got := b.ModelServers("bot@1"); len(got) != 1 || got[0] != "w1" || len(b.ModelServers("")) != 0 {
		t.Fatalf("restored model servers of bot@1 %v, of the default agent %v", got, b.ModelServers(""))
	}
	if got := b.ToolServersFor("lookup", "other"); len(got) != 0 || len(b.ToolServersFor("lookup", "bot@1")) != 1 {
		t.Fatal("restored tool rows lost the agents lookup is served for")
	}
	// Both go on identically.
	d2 := &driver{t: t, f: g, index: d.index, now: d.now, epoch: d.epoch}
	more := &fsmpb.Command{NowMs: d.now, Body: &fsmpb.Command_SendMessage{SendMessage: &fsmpb.SendMessage{SessionId: "c", MessageId: "more", Text: "more"}}}
	d.do(more)
	d2.do(more)
	if !bytes.Equal(persist(t, d.f), persist(t, d2.f)) {
		t.Fatal("the restored state diverged on the same command")
	}
}

func TestSnapshot_ADamagedOneIsRefusedAndChangesNothing(t *testing.T) {
	d := busyState(t)
	before := persist(t, d.f)
	for name, data := range map[string][]byte{
		"foreign": []byte("PK\x03\x04 not a snapshot"),
		"empty":   nil,
		"cut":     before[:len(before)-1], // inside the last record
		"version": append([]byte(snapshotMagic+"\x09"), before[len(snapshotMagic)+1:]...),
	} {
		err := d.f.Restore(bytes.NewReader(data))
		if !errors.Is(err, ErrBadSnapshot) {
			t.Fatalf("%s snapshot: %v; want ErrBadSnapshot", name, err)
		}
		if !bytes.Equal(before, persist(t, d.f)) {
			t.Fatalf("a refused %s snapshot changed the state", name)
		}
	}
}

func TestApply_UnknownCommandTypeHaltsNamingTheIndex(t *testing.T) {
	d := newDriver(t)
	// A command from a newer version: its body is a field this build lacks.
	future := append(mustEncode(t, &fsmpb.Command{NowMs: 1}), 0xfa, 0x3e, 0x00) // field 999, empty bytes
	res := d.f.ApplyEntry(d.index+1, future)
	if res.Err == nil || len(d.halts) != 1 || !strings.Contains(d.halts[0].Error(), "log entry 3 ") {
		t.Fatalf("unknown command: result %v, halts %v; want one halt naming entry 3", res.Err, d.halts)
	}
	// Nothing applies after a halt.
	if res := d.try(&fsmpb.Command{Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{SessionId: "x"}}}); res.Err == nil {
		t.Fatal("a halted state machine applied a command")
	}
}

func TestApply_UnknownIgnorableCommandIsSkipped(t *testing.T) {
	d := newDriver(t)
	before := d.stateBytes()
	future := append(mustEncode(t, &fsmpb.Command{NowMs: 1, Ignorable: true}), 0xfa, 0x3e, 0x00)
	d.index++
	res := d.f.ApplyEntry(d.index, future)
	if res.Err != nil || !res.Ignored || len(d.halts) != 0 {
		t.Fatalf("ignorable unknown command: %v ignored=%v halts=%v", res.Err, res.Ignored, d.halts)
	}
	if !bytes.Equal(before, d.stateBytes()) {
		t.Fatal("an ignored command changed the state")
	}
	if d.f.State().Meta().AppliedIndex != d.index {
		t.Fatal("the applied index did not move past the ignored entry")
	}
	d.createSession("s", "", "still working")
}

func TestApply_GarbageEntryHalts(t *testing.T) {
	d := newDriver(t)
	d.f.ApplyEntry(d.index+1, []byte{0xff, 0xff, 0xff})
	if len(d.halts) != 1 {
		t.Fatal("an undecodable entry did not halt the state machine")
	}
}

func mustEncode(t testing.TB, c *fsmpb.Command) []byte {
	t.Helper()
	b, err := Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
