package fsm

import (
	"strings"
	"testing"

	"github.com/dexhq/dex/fsm/fsmpb"
)

func (d *driver) startCmd(st *fsmpb.Step, worker string) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_StartAttempt{StartAttempt: &fsmpb.StartAttempt{
		StepId: st.Id, Attempt: uint32(len(st.Attempts)) + 1, WorkerId: worker, Epoch: d.epoch,
	}}}
}

func wantReason(t *testing.T, r *Rejection, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(r.Reason, p) {
			t.Errorf("reason %q does not say %q", r.Reason, p)
		}
	}
}

func TestServes_AModelStepStartsOnlyOnAWorkerOfItsAgent(t *testing.T) {
	d := newDriver(t)
	d.do(registerAgents("m1", []string{"bot@1"}))
	d.do(registerAgents("m2", []string{"bot@2"}))
	d.do(d.createAgentSession("s", "", "bot@1", "hi"))
	st := d.queued("s", kRunModel)

	wantReason(t, d.refused(d.startCmd(st, "m2"), CodeFailedPrecondition), `"m2"`, `agent "bot@1"`, `agent "bot@2"`)
	wantReason(t, d.refused(d.startCmd(st, "w1"), CodeFailedPrecondition), `"w1"`, `agent "bot@1"`)
	d.do(d.registerTools("t1", toolFor("lookup")))
	wantReason(t, d.refused(d.startCmd(st, "t1"), CodeFailedPrecondition), `"t1" runs no model`)

	res := d.do(d.startCmd(st, "m1"))
	if res.Attempt.WorkerId != "m1" {
		t.Fatalf("attempt went to %q; want m1", res.Attempt.WorkerId)
	}
}

func TestServes_TheDefaultAgentsModelStepNeedsAWorkerThatListsNoAgent(t *testing.T) {
	d := newDriver(t)
	d.do(registerAgents("m1", []string{"bot@1"}))
	d.createSession("s", "", "hi")
	st := d.queued("s", kRunModel)
	wantReason(t, d.refused(d.startCmd(st, "m1"), CodeFailedPrecondition), "the default agent")
	d.do(d.startCmd(st, "w1"))
}

func TestServes_AToolStepStartsOnlyOnAWorkerServingItsToolForItsAgent(t *testing.T) {
	d := newDriver(t)
	d.do(registerAgents("m2", []string{"bot@2"}))
	d.do(d.registerTools("only1", toolFor("search", "bot@1")))
	d.do(d.registerTools("nosearch", toolFor("fetch")))
	d.do(d.registerTools("every", toolFor("search")))
	d.do(d.createAgentSession("s", "", "bot@2", "hi"))
	d.startNext("s", kRunModel).answer("", call("q", "search", "{}"))
	st := d.queued("s", kCallTool)

	wantReason(t, d.refused(d.startCmd(st, "only1"), CodeFailedPrecondition), `tool "search" only for agent "bot@1"`, `not for agent "bot@2"`)
	wantReason(t, d.refused(d.startCmd(st, "nosearch"), CodeFailedPrecondition), `"nosearch" does not serve tool "search"`)
	wantReason(t, d.refused(d.startCmd(st, "m2"), CodeFailedPrecondition), `"m2" does not serve tool "search"`)
	d.do(d.startCmd(st, "every"))
}

func (d *driver) registerTools(id string, tools ...*fsmpb.ToolSpec) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_RegisterWorker{RegisterWorker: &fsmpb.RegisterWorker{WorkerId: id, Tools: tools}}}
}
