package fsm

import (
	"bytes"
	"testing"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// Predict names the Steps a command would leave ready to hand out, exactly
// as applying it then does, and changes nothing.
func TestPredict_NamesTheStepsACommandQueuesAndChangesNothing(t *testing.T) {
	d := newDriver(t)
	create := &fsmpb.Command{NowMs: d.now, Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{
		SessionId: "s1", MessageId: "m1", Message: "hello",
	}}}
	before := d.stateBytes()
	got := d.f.Predict(create)
	if !bytes.Equal(before, d.stateBytes()) {
		t.Fatal("Predict changed the state")
	}
	d.do(create)
	want := d.queued("s1", dexv1.StepKind_STEP_KIND_RUN_MODEL)
	if len(got) != 1 || got[0].Id != want.Id || got[0].Kind != want.Kind || got[0].Status != dexv1.StepStatus_STEP_STATUS_QUEUED {
		t.Fatalf("predicted %v; want %s", got, want.Id)
	}

	// The model calls a tool that needs approval and one that runs at once:
	// only the second is handed to a Worker.
	h := d.start(want)
	out := h.output("calling", call("c1", "deploy", `{}`), call("c2", "lookup", `{}`))
	got = d.f.Predict(out)
	d.do(out)
	if len(got) != 1 || got[0].Tool != "lookup" || d.step(got[0].Id).Status != dexv1.StepStatus_STEP_STATUS_QUEUED {
		t.Fatalf("predicted %v; want the queued lookup call", got)
	}
	if approval := d.latest("s1", dexv1.StepKind_STEP_KIND_AWAIT_TOOL_APPROVAL); approval == nil {
		t.Fatal("no approval wait: the test does not exercise a wait")
	}

	// A rejected command, one that queues nothing, and a halted machine
	// predict nothing.
	if got := d.f.Predict(create); got != nil {
		t.Fatalf("a repeated CreateSession predicted %v", got)
	}
	if got := d.f.Predict(&fsmpb.Command{NowMs: d.now, Body: &fsmpb.Command_RegisterWorker{RegisterWorker: &fsmpb.RegisterWorker{WorkerId: "w2"}}}); got != nil {
		t.Fatalf("a registration predicted %v", got)
	}
	if got := d.f.Predict(&fsmpb.Command{}); got != nil {
		t.Fatalf("an empty command predicted %v", got)
	}
	d.f.halt(d.index+1, "test")
	if got := d.f.Predict(&fsmpb.Command{NowMs: d.now, Body: &fsmpb.Command_SendMessage{SendMessage: &fsmpb.SendMessage{SessionId: "s1", MessageId: "m2", Text: "more"}}}); got != nil {
		t.Fatalf("a halted machine predicted %v", got)
	}
}
