package fsm

import (
	"strings"
	"testing"

	"github.com/dexhq/dex/fsm/fsmpb"
)

func (d *driver) createAgentSession(id, parent, agent, msg string) *fsmpb.Command {
	c := &fsmpb.CreateSession{SessionId: id, ParentId: parent, Agent: agent}
	if msg != "" {
		c.MessageId, c.Message = id+"-m0", msg
	}
	return &fsmpb.Command{Body: &fsmpb.Command_CreateSession{CreateSession: c}}
}

func registerAgents(id string, agents []string, tools ...*fsmpb.ToolSpec) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_RegisterWorker{RegisterWorker: &fsmpb.RegisterWorker{
		WorkerId: id, Tools: tools, RunsModel: true, Agents: agents,
	}}}
}

func toolFor(name string, agents ...string) *fsmpb.ToolSpec {
	return &fsmpb.ToolSpec{Name: name, Access: fsmpb.ToolAccess_TOOL_ACCESS_READ, Agents: agents}
}

func TestAgents_ASessionKeepsItsAgentAndItsStepsCarryIt(t *testing.T) {
	d := newDriver(t)
	d.do(registerAgents("m1", []string{"bot@1"}))
	d.do(d.createAgentSession("s", "", "bot@1", "hi"))
	if got := d.session("s").Agent; got != "bot@1" {
		t.Fatalf("session agent %q; want bot@1", got)
	}
	if got := d.queued("s", kRunModel).Agent; got != "bot@1" {
		t.Fatalf("RunModel agent %q; want bot@1", got)
	}
	d.startNext("s", kRunModel).answer("", call("l", "lookup", "{}"))
	if got := d.queued("s", kCallTool).Agent; got != "bot@1" {
		t.Fatalf("tool Step agent %q; want bot@1", got)
	}
	d.createSession("plain", "", "hi")
	if got := d.queued("plain", kRunModel).Agent; got != "" {
		t.Fatalf("a session that names no agent runs %q; want the default agent", got)
	}
}

func TestAgents_AChildRunsItsParentsAgentUnlessItNamesOne(t *testing.T) {
	d := newDriver(t)
	d.do(d.createAgentSession("p", "", "planner@3", ""))
	d.createSession("c1", "p", "")
	d.do(d.createAgentSession("c2", "p", "coder@1", ""))
	if got := d.session("c1").Agent; got != "planner@3" {
		t.Fatalf("child that names no agent runs %q; want its parent's planner@3", got)
	}
	if got := d.session("c2").Agent; got != "coder@1" {
		t.Fatalf("child that names coder@1 runs %q", got)
	}
}

func TestAgents_BadNamesAreRefusedAndChangeNothing(t *testing.T) {
	d := newDriver(t)
	long := strings.Repeat("a", maxIDLength+1)
	for _, bad := range []string{"a/b", "bot 1", "..", long, "bot\n"} {
		d.refused(d.createAgentSession("s", "", bad, "hi"), CodeInvalid)
	}
	if d.f.State().Session("s") != nil {
		t.Fatal("a refused session was created")
	}
	for name, cmd := range map[string]*fsmpb.Command{
		"empty agent":         registerAgents("w9", []string{""}),
		"bad agent":           registerAgents("w9", []string{"a/b"}),
		"twice":               registerAgents("w9", []string{"bot@1", "bot@1"}),
		"tool empty agent":    registerAgents("w9", nil, toolFor("t1", "")),
		"tool bad agent":      registerAgents("w9", nil, toolFor("t1", "x y")),
		"tool twice":          registerAgents("w9", nil, toolFor("t1", "b", "b")),
		"agents but no model": {Body: &fsmpb.Command_RegisterWorker{RegisterWorker: &fsmpb.RegisterWorker{WorkerId: "w9", Agents: []string{"bot"}}}},
	} {
		r := d.refused(cmd, CodeInvalid)
		if !strings.Contains(r.Reason, "agent") {
			t.Errorf("%s: reason %q does not speak of agents", name, r.Reason)
		}
	}
	if d.f.State().Worker("w9") != nil {
		t.Fatal("a refused Worker was registered")
	}
}

func TestAgents_ServersAreMatchedExactlyByAgent(t *testing.T) {
	d := newDriver(t)
	d.do(d.deregister("w1"))
	d.do(registerAgents("m1", []string{"bot@1"}, toolFor("search", "bot@1"), toolFor("fetch")))
	d.do(registerAgents("m2", []string{"bot@2"}, toolFor("search", "bot@2")))
	d.do(registerAgents("m0", nil))
	st := d.f.State()
	for agent, want := range map[string]string{"bot@1": "m1", "bot@2": "m2", "": "m0"} {
		if got := st.ModelServers(agent); len(got) != 1 || got[0] != want {
			t.Errorf("model servers of %q = %v; want [%s]", agent, got, want)
		}
	}
	if got := st.ModelServers("bot"); len(got) != 0 {
		t.Errorf("model servers of bot = %v; a version is not a prefix", got)
	}
	if got := st.ToolServersFor("search", "bot@2"); len(got) != 1 || got[0] != "m2" {
		t.Errorf("search servers for bot@2 = %v", got)
	}
	if got := st.ToolServersFor("fetch", "anyone"); len(got) != 1 || got[0] != "m1" {
		t.Errorf("fetch (every agent) servers for anyone = %v", got)
	}
	// The agents are the Worker's, not the tool's policy: one policy row.
	if got := st.Tool("search"); got == nil || len(got.Agents) != 0 {
		t.Fatalf("catalog row of search = %v; want a policy without agents", got)
	}
	d.refused(registerAgents("m3", []string{"bot@3"}, &fsmpb.ToolSpec{Name: "search", Access: fsmpb.ToolAccess_TOOL_ACCESS_SINGLE_ATTEMPT, Agents: []string{"bot@3"}}), CodeFailedPrecondition)
}

func TestAgents_AModelStepOfAnUnservedAgentWaitsThenFailsItsTurn(t *testing.T) {
	d := newDriver(t)
	d.do(d.createAgentSession("s", "", "bot@3", "hi"))
	st := d.queued("s", kRunModel)
	if why := d.f.State().WaitingReason(st); !strings.Contains(why, `agent "bot@3"`) {
		t.Fatalf("waiting reason %q does not name the agent", why)
	}
	d.do(registerAgents("m3", []string{"bot@3"}))
	if why := d.f.State().WaitingReason(d.step(st.Id)); why != "" {
		t.Fatalf("waiting reason %q with a Worker of bot@3 registered", why)
	}
	if r := d.refused(d.failUnserved(st.Id), CodeFailedPrecondition); !strings.Contains(r.Reason, `"m3"`) {
		t.Fatalf("reason %q does not name the serving Worker", r.Reason)
	}
	d.do(d.deregister("m3"))
	d.do(d.failUnserved(st.Id))
	s := d.session("s")
	if s.Status != fsmpb.SessionStatus_SESSION_STATUS_ERRORED || !strings.Contains(s.LastError, `no live Worker served agent "bot@3"`) {
		t.Fatalf("session is %s with last error %q", StatusName(s.Status), s.LastError)
	}
	if got := d.step(st.Id); got.Status != fsmpb.StepStatus_STEP_STATUS_DONE || len(got.Attempts) != 0 {
		t.Fatalf("the unserved RunModel is %s with %d attempts", got.Status, len(got.Attempts))
	}
	if s.ResumeAtMs == 0 {
		t.Fatal("the session keeps no resume: a Worker of bot@3 that comes later would never run it")
	}
}

func TestAgents_TheDefaultAgentsModelStepWaitsAsBefore(t *testing.T) {
	d := newDriver(t)
	d.do(d.deregister("w1")) // no Worker runs the default agent's model
	d.createSession("s", "", "hi")
	st := d.queued("s", kRunModel)
	if why := d.f.State().WaitingReason(st); !strings.Contains(why, "the default agent") {
		t.Fatalf("waiting reason %q", why)
	}
	d.refused(d.failUnserved(st.Id), CodeFailedPrecondition)
}

func TestAgents_AToolServedOnlyForAnotherAgentFailsNamingTheAgent(t *testing.T) {
	d := newDriver(t)
	d.do(registerAgents("m1", []string{"bot@1", "bot@2"}, toolFor("search", "bot@1")))
	d.do(d.createAgentSession("s", "", "bot@2", "hi"))
	d.startNext("s", kRunModel).answer("", call("q", "search", "{}"))
	st := d.queued("s", kCallTool)
	if why := d.f.State().WaitingReason(st); !strings.Contains(why, `tool "search" for agent "bot@2"`) {
		t.Fatalf("waiting reason %q", why)
	}
	d.do(d.failUnserved(st.Id))
	q := toolResults(d.session("s"))["q"]
	if q.Outcome != fsmpb.Outcome_OUTCOME_FAILED || !strings.HasPrefix(q.Text, NotRunPrefix) || !strings.Contains(q.Text, `agent "bot@2"`) {
		t.Fatalf("search recorded %s %q", OutcomeName(q.Outcome), q.Text)
	}
	// A tool served for every agent serves bot@2 too.
	d.do(registerAgents("m2", nil, toolFor("search")))
	d.startNext("s", kRunModel).answer("", call("q2", "search", "{}"))
	d.refused(d.failUnserved(d.queued("s", kCallTool).Id), CodeFailedPrecondition)
}
