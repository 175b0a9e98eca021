package fsm

import (
	"bytes"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protodelim"

	"github.com/dexhq/dex/fsm/fsmpb"
)

func register(id string, tools ...*fsmpb.ToolSpec) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_RegisterWorker{RegisterWorker: &fsmpb.RegisterWorker{WorkerId: id, Tools: tools}}}
}

func (d *driver) deregister(id string) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_DeregisterWorker{DeregisterWorker: &fsmpb.DeregisterWorker{WorkerId: id, Epoch: d.epoch}}}
}

func (d *driver) failUnserved(step string) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_FailUnservedStep{FailUnservedStep: &fsmpb.FailUnservedStep{StepId: step, Epoch: d.epoch, WaitedMs: 300000}}}
}

var (
	emailOnce  = &fsmpb.ToolSpec{Name: "send_email", Access: fsmpb.ToolAccess_TOOL_ACCESS_SINGLE_ATTEMPT}
	emailRead5 = &fsmpb.ToolSpec{Name: "send_email", Access: fsmpb.ToolAccess_TOOL_ACCESS_READ, MaxAttempts: 5}
)

func TestCatalog_AnotherPolicyThanALiveWorkersIsRefusedNamingBoth(t *testing.T) {
	d := newDriver(t) // w1 serves send_email single-attempt
	r := d.refused(register("a0", emailRead5), CodeFailedPrecondition)
	for _, want := range []string{`"send_email"`, `"w1"`, `"a0"`, "single_attempt", "read with 5 attempts"} {
		if !strings.Contains(r.Reason, want) {
			t.Errorf("reason %q does not name %s", r.Reason, want)
		}
	}
	if d.f.State().Worker("a0") != nil {
		t.Fatal("the refused Worker was registered")
	}
	// The same policy with another description is no conflict.
	d.do(register("w2", &fsmpb.ToolSpec{Name: "send_email", Access: fsmpb.ToolAccess_TOOL_ACCESS_SINGLE_ATTEMPT, Description: "mail"}))
	if got := d.f.State().ToolServers("send_email"); len(got) != 2 || got[0] != "w1" || got[1] != "w2" {
		t.Fatalf("servers of send_email = %v; want [w1 w2]", got)
	}
}

func TestCatalog_ACallRunsByTheLiveToolsPolicy(t *testing.T) {
	d := newDriver(t)
	d.try(register("a0", emailRead5)) // refused: it cannot override w1
	d.createSession("s", "", "hi")
	d.startNext("s", kRunModel).answer("", call("e", "send_email", "{}"))
	if st := d.queued("s", kSingle); st.MaxAttempts != 1 {
		t.Fatalf("send_email runs with %d attempts; want 1", st.MaxAttempts)
	}
}

func TestCatalog_TheSameWorkerReplacesItsOwnRows(t *testing.T) {
	d := newDriver(t)
	d.do(register("w1", emailRead5, &fsmpb.ToolSpec{Name: "fetch", Access: fsmpb.ToolAccess_TOOL_ACCESS_READ}))
	st := d.f.State()
	if got := st.Tool("send_email"); got.Access != fsmpb.ToolAccess_TOOL_ACCESS_READ || got.MaxAttempts != 5 {
		t.Fatalf("send_email is %s; want read with 5 attempts", PolicyText(got))
	}
	if st.Tool("deploy") != nil || len(st.ToolServers("deploy")) != 0 {
		t.Fatal("a tool w1 no longer registers stays in the catalog")
	}
	if st.Tool("fetch") == nil {
		t.Fatal("the new tool is not in the catalog")
	}
}

func TestCatalog_TheLastWorkerGoneFreesTheName(t *testing.T) {
	d := newDriver(t)
	d.do(register("w2", emailOnce))
	d.do(d.deregister("w1"))
	if got := d.f.State().ToolServers("send_email"); len(got) != 1 || got[0] != "w2" {
		t.Fatalf("servers of send_email = %v; want [w2]", got)
	}
	if d.f.State().Tool("lookup") != nil {
		t.Fatal("lookup stays in the catalog with no Worker serving it")
	}
	d.refused(register("w3", emailRead5), CodeFailedPrecondition) // w2 still serves it
	d.do(d.deregister("w2"))
	if d.f.State().Tool("send_email") != nil || d.f.State().Worker("w2") != nil {
		t.Fatal("the last Worker's tool or registration stayed")
	}
	d.do(register("w3", emailRead5))
	if got := d.f.State().Tool("send_email"); got.Access != fsmpb.ToolAccess_TOOL_ACCESS_READ {
		t.Fatalf("send_email is %s after w3 registered it as a read", PolicyText(got))
	}
}

func TestCatalog_DeregistrationIsRefusedWhenStaleOrUnknown(t *testing.T) {
	d := newDriver(t)
	stale := d.deregister("w1")
	d.newEpoch()
	if r := d.refused(stale, CodeFailedPrecondition); !strings.Contains(r.Reason, "stale dispatch epoch") {
		t.Fatalf("reason %q", r.Reason)
	}
	d.refused(d.deregister("nobody"), CodeNotFound)
	d.refused(d.deregister(""), CodeInvalid)
	if d.f.State().Worker("w1") == nil || d.f.State().Tool("send_email") == nil {
		t.Fatal("a refused deregistration changed the catalog")
	}
}

func TestCatalog_SurvivesSnapshotAndRestore(t *testing.T) {
	d := newDriver(t)
	d.do(register("w2", emailOnce))
	snap := persist(t, d.f)
	g := New(Options{})
	if err := g.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snap, persist(t, g)) {
		t.Fatal("the restored catalog persists to different bytes")
	}
	d.f = g
	if got := d.f.State().ToolServers("send_email"); len(got) != 2 {
		t.Fatalf("servers of send_email after restore = %v", got)
	}
	d.refused(register("a0", emailRead5), CodeFailedPrecondition)
}

func unservedEmail(t *testing.T) (*driver, *fsmpb.Step) {
	d := newDriver(t)
	d.createSession("s", "", "hi")
	d.startNext("s", kRunModel).answer("", call("e", "send_email", "{}"))
	return d, d.queued("s", kSingle)
}

func TestToolWait_AQueuedStepOfAnUnservedToolFailsAsUnknownNotRun(t *testing.T) {
	d, st := unservedEmail(t)
	if r := d.refused(d.failUnserved(st.Id), CodeFailedPrecondition); !strings.Contains(r.Reason, `"w1"`) {
		t.Fatalf("reason %q does not name the serving Worker", r.Reason)
	}
	if got := d.f.State().QueuedStepsOfTool("send_email"); len(got) != 1 || got[0].Id != st.Id {
		t.Fatalf("queued steps of send_email = %v", got)
	}
	d.do(d.deregister("w1"))
	stale := d.failUnserved(st.Id)
	d.newEpoch()
	d.refused(stale, CodeFailedPrecondition)
	d.do(d.failUnserved(st.Id))
	e := toolResults(d.session("s"))["e"]
	if e.Outcome != fsmpb.Outcome_OUTCOME_FAILED || !strings.HasPrefix(e.Text, NotRunPrefix) ||
		!strings.Contains(e.Text, `unknown tool "send_email": no live Worker served it for 5m0s`) {
		t.Fatalf("send_email recorded %s %q", OutcomeName(e.Outcome), e.Text)
	}
	if len(d.f.State().QueuedStepsOfTool("send_email")) != 0 {
		t.Fatal("the failed Step is still queued")
	}
	d.queued("s", kRunModel) // the model is told
	d.refused(d.failUnserved(st.Id), CodeFailedPrecondition)
	d.refused(d.failUnserved(d.queued("s", kRunModel).Id), CodeFailedPrecondition)
}

func TestToolWait_AWriteThatMayHaveRunIsNotCalledNotRun(t *testing.T) {
	d := newDriver(t)
	d.createSession("s", "", "hi")
	d.startNext("s", kRunModel).answer("", call("n", "save_note", "{}"))
	d.startNext("s", kCallTool).claim().expire() // requeued for attempt 2
	st := d.queued("s", kCallTool)
	d.do(d.deregister("w1"))
	d.do(d.failUnserved(st.Id))
	n := toolResults(d.session("s"))["n"]
	if n.Outcome != fsmpb.Outcome_OUTCOME_UNKNOWN || strings.HasPrefix(n.Text, NotRunPrefix) {
		t.Fatalf("save_note recorded %s %q; want outcome_unknown", OutcomeName(n.Outcome), n.Text)
	}
}

// A snapshot written before the catalog existed has Workers but no catalog
// rows: Restore rebuilds the catalog from the Workers.
func TestCatalog_RestoreOfASnapshotWithoutCatalogRebuildsIt(t *testing.T) {
	d := newDriver(t)
	d.do(register("w2", emailOnce))
	var old bytes.Buffer
	old.WriteString(snapshotMagic)
	old.WriteByte(snapshotVersion)
	in := bytes.NewReader(persist(t, d.f)[len(snapshotMagic)+1:])
	for {
		rec := &fsmpb.SnapshotRecord{}
		if err := protodelim.UnmarshalFrom(in, rec); err != nil {
			break
		}
		switch rec.Record.(type) {
		case *fsmpb.SnapshotRecord_Tool, *fsmpb.SnapshotRecord_WorkerTool:
			continue
		}
		if _, err := protodelim.MarshalTo(&old, rec); err != nil {
			t.Fatal(err)
		}
	}
	g := New(Options{})
	if err := g.Restore(&old); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(persist(t, d.f), persist(t, g)) {
		t.Fatal("the rebuilt catalog differs from the one the commands built")
	}
}
