package fsm

import (
	"strings"
	"testing"
	"time"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// Run timeouts: an attempt's deadline is stored from the Step's policy when
// it starts, and past it the leader fails the attempt with error type timeout.

var slowTools = []*fsmpb.ToolSpec{
	{Name: "slow_read", Access: fsmpb.ToolAccess_TOOL_ACCESS_READ, MaxAttempts: 2, RunTimeoutMs: 30_000},
	{Name: "slow_write", Access: fsmpb.ToolAccess_TOOL_ACCESS_IDEMPOTENT_WRITE, MaxAttempts: 2, RunTimeoutMs: 30_000},
	{Name: "slow_email", Access: fsmpb.ToolAccess_TOOL_ACCESS_SINGLE_ATTEMPT, RunTimeoutMs: 30_000},
}

const modelRunTimeout = 2 * time.Minute

// newRunDriver is a driver whose Worker w1 also serves the slow tools and
// registered a model run timeout; w2 runs the model without one.
func newRunDriver(t *testing.T) *driver {
	d := newDriver(t)
	d.do(&fsmpb.Command{Body: &fsmpb.Command_RegisterWorker{RegisterWorker: &fsmpb.RegisterWorker{
		WorkerId: "w1", Tools: append(append([]*fsmpb.ToolSpec{}, demoTools...), slowTools...),
		RunsModel: true, ModelRunTimeoutMs: uint32(modelRunTimeout.Milliseconds()),
	}}})
	d.do(&fsmpb.Command{Body: &fsmpb.Command_RegisterWorker{RegisterWorker: &fsmpb.RegisterWorker{WorkerId: "w2", RunsModel: true}}})
	return d
}

// startOn starts the next attempt of a queued Step on a Worker with the
// leader's default run timeout.
func (d *driver) startOn(st *fsmpb.Step, worker string, defaultTimeout time.Duration) (*handle, *fsmpb.Attempt) {
	d.t.Helper()
	if d.now < st.ReadyAtMs {
		d.now = st.ReadyAtMs
	}
	n := uint32(len(st.Attempts)) + 1
	res := d.do(&fsmpb.Command{Body: &fsmpb.Command_StartAttempt{StartAttempt: &fsmpb.StartAttempt{
		StepId: st.Id, Attempt: n, WorkerId: worker, Epoch: d.epoch, DefaultRunTimeoutMs: uint32(defaultTimeout.Milliseconds()),
	}}})
	return &handle{d: d, st: st.Id, n: n, tok: res.Attempt.Token}, res.Attempt
}

func (h *handle) timeoutCmd() *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_TimeoutAttempt{TimeoutAttempt: &fsmpb.TimeoutAttempt{StepId: h.st, Attempt: h.n, Epoch: h.d.epoch}}}
}

// timeout moves the clock to the attempt's deadline and times it out, as the
// leader does.
func (h *handle) timeout() {
	h.d.t.Helper()
	at := h.d.step(h.st).Attempts[h.n-1]
	h.d.now = max(h.d.now, at.DeadlineMs)
	h.d.do(h.timeoutCmd())
}

func TestRunTimeout_DeadlineIsTheStartPlusThePolicysTimeout(t *testing.T) {
	d := newRunDriver(t)
	const def = time.Hour
	d.createSession("s", "", "go")
	_, at := d.startOn(d.queued("s", kRunModel), "w1", def)
	if want := at.StartedAtMs + modelRunTimeout.Milliseconds(); at.DeadlineMs != want {
		t.Fatalf("model attempt on w1: deadline %d; want start + the model run timeout w1 registered (%d)", at.DeadlineMs, want)
	}
	d.createSession("s2", "", "go")
	_, at = d.startOn(d.queued("s2", kRunModel), "w2", def)
	if want := at.StartedAtMs + def.Milliseconds(); at.DeadlineMs != want {
		t.Fatalf("model attempt on w2: deadline %d; want start + the leader's default (%d)", at.DeadlineMs, want)
	}

	cases := []struct {
		tool string
		def  time.Duration
		want time.Duration
	}{
		{"slow_read", def, 30 * time.Second},
		{"slow_email", 0, 30 * time.Second},
		{"lookup", def, def},
		{"lookup", 0, 0},
	}
	for i, c := range cases {
		s := "t" + string(rune('a'+i))
		d.createSession(s, "", "go")
		d.startNext(s, kRunModel).answer("calling", call("c1", c.tool, "{}"))
		kind := kCallTool
		if c.tool == "slow_email" {
			kind = kSingle
		}
		st := d.latest(s, kind)
		_, at := d.startOn(st, "w1", c.def)
		want := int64(0)
		if c.want > 0 {
			want = at.StartedAtMs + c.want.Milliseconds()
		}
		if at.DeadlineMs != want || d.step(st.Id).Attempts[0].DeadlineMs != want {
			t.Errorf("%s with default %s: deadline %d; want %d", c.tool, c.def, at.DeadlineMs, want)
		}
	}
}

func TestRunTimeout_AModelAttemptPastItsDeadlineFailsAsARetryableTimeout(t *testing.T) {
	d := newRunDriver(t)
	d.createSession("s", "", "go")
	st := d.queued("s", kRunModel)
	for i := range ModelMaxAttempts {
		h, _ := d.startOn(d.step(st.Id), "w1", 0)
		h.claim()
		h.timeout()
		at := d.step(st.Id).Attempts[i]
		if at.Status != fsmpb.AttemptStatus_ATTEMPT_STATUS_FAILED || at.ErrorType != fsmpb.ErrorType_ERROR_TYPE_TIMEOUT {
			t.Fatalf("attempt %d is %s with error type %s; want failed with timeout", at.N, at.Status, at.ErrorType)
		}
		if !strings.Contains(at.Error, "ran past its run timeout of 2m0s") {
			t.Fatalf("attempt %d error %q", at.N, at.Error)
		}
	}
	st = d.step(st.Id)
	if st.Status != fsmpb.StepStatus_STEP_STATUS_DONE || attemptsOf(st) != ModelMaxAttempts {
		t.Fatalf("model Step is %s after %d attempts; want done after %d timeouts", st.Status, attemptsOf(st), ModelMaxAttempts)
	}
	s := d.session("s")
	wantStatus(t, s, sErrored)
	if !s.ErrorEpisode || s.RejectedTurns != 0 || !strings.HasPrefix(s.LastError, "timeout: ") {
		t.Fatalf("a timeout is a retryable failure: episode %v, rejected turns %d, last error %q", s.ErrorEpisode, s.RejectedTurns, s.LastError)
	}
}

func TestRunTimeout_AToolCallEndsByItsPolicy(t *testing.T) {
	cases := []struct {
		tool     string
		kind     fsmpb.StepKind
		attempts int
		want     fsmpb.Outcome
		prefix   string
	}{
		{"slow_read", kCallTool, 2, oFailed, "the tool failed after 2 attempts: the attempt ran past its run timeout of 30s"},
		{"slow_write", kCallTool, 2, oUnknown, "the outcome of this call is unknown"},
		{"slow_email", kSingle, 1, oUnknown, "the outcome of this call is unknown"},
	}
	for _, c := range cases {
		t.Run(c.tool, func(t *testing.T) {
			d := newRunDriver(t)
			st := toolTurn(t, d, "s", call("c1", c.tool, "{}"), c.kind)
			for range c.attempts {
				h, _ := d.startOn(d.step(st.Id), "w1", 0)
				h.claim()
				h.timeout()
			}
			st = d.step(st.Id)
			if st.Status != fsmpb.StepStatus_STEP_STATUS_DONE || attemptsOf(st) != c.attempts {
				t.Fatalf("Step is %s with %d attempts; want done after %d", st.Status, attemptsOf(st), c.attempts)
			}
			if st.Outcome != c.want || !strings.HasPrefix(st.Result, c.prefix) || !strings.Contains(st.Result, "run timeout of 30s") {
				t.Fatalf("call records %s %q; want %s beginning %q", OutcomeName(st.Outcome), st.Result, OutcomeName(c.want), c.prefix)
			}
			// The model hears of it in the next turn.
			if r := toolResults(d.session("s"))["c1"]; r == nil || !strings.Contains(r.Text, "run timeout") {
				t.Fatalf("tool result in the history: %v", r)
			}
		})
	}
}

func TestRunTimeout_RefusedWhenStaleEarlyEndedOrWithoutDeadline(t *testing.T) {
	d := newRunDriver(t)
	st := toolTurn(t, d, "s", call("c1", "slow_read", "{}"), kCallTool)
	h, at := d.startOn(st, "w1", 0)
	h.claim()

	d.now = at.DeadlineMs - 1
	d.refused(h.timeoutCmd(), CodeFailedPrecondition) // before the deadline
	d.now = at.DeadlineMs

	stale := h.timeoutCmd()
	stale.GetTimeoutAttempt().Epoch = d.epoch - 1
	if r := d.refused(stale, CodeFailedPrecondition); !strings.Contains(r.Error(), "stale dispatch epoch") {
		t.Fatalf("stale epoch: %v", r)
	}
	wrong := h.timeoutCmd()
	wrong.GetTimeoutAttempt().Attempt = 2
	d.refused(wrong, CodeFailedPrecondition)
	unknown := h.timeoutCmd()
	unknown.GetTimeoutAttempt().StepId = "nope"
	d.refused(unknown, CodeNotFound)
	missing := h.timeoutCmd()
	missing.GetTimeoutAttempt().StepId = ""
	d.refused(missing, CodeInvalid)

	// The result arrived first: a timeout of the ended attempt changes nothing.
	h.result("found it")
	if r := d.refused(h.timeoutCmd(), CodeFailedPrecondition); !strings.Contains(r.Error(), "already ended") {
		t.Fatalf("timeout after the end: %v", r)
	}
	if st = d.step(st.Id); st.Outcome != oSucceeded {
		t.Fatalf("call records %s; want succeeded", OutcomeName(st.Outcome))
	}

	// An attempt with no run timeout cannot time out.
	st = toolTurn(t, d, "s2", call("c1", "lookup", "{}"), kCallTool)
	h, _ = d.startOn(st, "w1", 0)
	d.advance(24 * time.Hour)
	if r := d.refused(h.timeoutCmd(), CodeFailedPrecondition); !strings.Contains(r.Error(), "no run timeout") {
		t.Fatalf("timeout without a deadline: %v", r)
	}
}

func TestRunTimeout_TheDeadlineSurvivesARestart(t *testing.T) {
	d := newRunDriver(t)
	st := toolTurn(t, d, "s", call("c1", "slow_email", "{}"), kSingle)
	h, at := d.startOn(st, "w1", 0)
	h.claim()
	d.restart()
	if got := d.step(st.Id).Attempts[0].DeadlineMs; got != at.DeadlineMs {
		t.Fatalf("deadline after a restart %d; want %d", got, at.DeadlineMs)
	}
	h.timeout() // the new leader, in its own epoch
	if st = d.step(st.Id); st.Outcome != oUnknown {
		t.Fatalf("call records %s; want outcome_unknown", OutcomeName(st.Outcome))
	}
}

func TestRunTimeout_IsPartOfTheToolsPolicy(t *testing.T) {
	d := newRunDriver(t)
	other := &fsmpb.ToolSpec{Name: "slow_read", Access: fsmpb.ToolAccess_TOOL_ACCESS_READ, MaxAttempts: 2, RunTimeoutMs: 60_000}
	r := d.refused(&fsmpb.Command{Body: &fsmpb.Command_RegisterWorker{RegisterWorker: &fsmpb.RegisterWorker{
		WorkerId: "w3", Tools: []*fsmpb.ToolSpec{other},
	}}}, CodeFailedPrecondition)
	if !strings.Contains(r.Error(), "run timeout 30s") || !strings.Contains(r.Error(), "run timeout 1m0s") {
		t.Fatalf("a second run timeout for one tool: %v", r)
	}
	same := &fsmpb.ToolSpec{Name: "slow_read", Access: fsmpb.ToolAccess_TOOL_ACCESS_READ, MaxAttempts: 2, RunTimeoutMs: 30_000, Description: "other words"}
	d.do(&fsmpb.Command{Body: &fsmpb.Command_RegisterWorker{RegisterWorker: &fsmpb.RegisterWorker{WorkerId: "w3", Tools: []*fsmpb.ToolSpec{same}}}})

	inline := &fsmpb.ToolSpec{Name: "quick", Access: fsmpb.ToolAccess_TOOL_ACCESS_READ, Inline: true, RunTimeoutMs: 1000}
	if r := d.refused(&fsmpb.Command{Body: &fsmpb.Command_RegisterWorker{RegisterWorker: &fsmpb.RegisterWorker{
		WorkerId: "w4", Tools: []*fsmpb.ToolSpec{inline},
	}}}, CodeInvalid); !strings.Contains(r.Error(), "inline") {
		t.Fatalf("inline tool with a run timeout: %v", r)
	}
}
