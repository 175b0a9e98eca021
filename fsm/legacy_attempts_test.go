package fsm

import (
	"bytes"
	"strings"
	"testing"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// legacyCommand is the CompleteAttempt or FailAttempt a log written before
// ReportAttempt holds for a Worker's report.
func legacyCommand(ref *fsmpb.AttemptRef, res *fsmpb.AttemptResult) *fsmpb.Command {
	c := &fsmpb.CompleteAttempt{Ref: ref}
	switch o := res.GetOutcome().(type) {
	case *fsmpb.AttemptResult_Failure:
		return &fsmpb.Command{Body: &fsmpb.Command_FailAttempt{FailAttempt: &fsmpb.FailAttempt{
			Ref: ref, ErrorType: o.Failure.GetErrorType(), Error: o.Failure.GetError(),
		}}}
	case *fsmpb.AttemptResult_ModelOutput:
		c.Result = &fsmpb.CompleteAttempt_ModelOutput{ModelOutput: o.ModelOutput}
	case *fsmpb.AttemptResult_ToolResult:
		c.Result = &fsmpb.CompleteAttempt_ToolResult{ToolResult: o.ToolResult}
	case *fsmpb.AttemptResult_PollResult:
		c.Result = &fsmpb.CompleteAttempt_PollResult{PollResult: o.PollResult}
	case *fsmpb.AttemptResult_Summary:
		c.Result = &fsmpb.CompleteAttempt_Summary{Summary: o.Summary}
	}
	return &fsmpb.Command{Body: &fsmpb.Command_CompleteAttempt{CompleteAttempt: c}}
}

// legacyTurns runs every kind of Worker report: a model output with calls, a
// failed and retried tool, a long-running tool and its polls, a compaction.
func legacyTurns(t *testing.T, d *driver) {
	t.Helper()
	compacting(t, d)
	d.startNext("s", kCompact).claim().summary("the user said hi")
	d.startNext("s", kRunModel).claim().answer("working", call("n", "save_note", "{}"), call("b", "build", "{}"))
	for _, st := range d.stepsOf("s", kCallTool) {
		if st.Tool == "save_note" {
			d.start(st).claim().fail(fsmpb.ErrorType_ERROR_TYPE_UNSPECIFIED, "disk full")
		} else {
			d.start(st).claim().do(func(h *handle) *fsmpb.Command { return h.toolResult("", false, "task-1") })
		}
	}
	retry := d.queued("s", kCallTool)
	d.now = max(d.now, retry.ReadyAtMs)
	d.start(retry).claim().result("saved")
	d.now = max(d.now, d.queued("s", kPoll).ReadyAtMs)
	d.startNext("s", kPoll).poll(false, "")
	d.now = max(d.now, d.queued("s", kPoll).ReadyAtMs)
	d.startNext("s", kPoll).poll(true, "built")
	d.startNext("s", kRunModel).answer("done")
	wantStatus(t, d.session("s"), sIdle)
}

func TestLegacyAttemptCommands_ApplyAsReportAttempt(t *testing.T) {
	// A log written before ReportAttempt (CompleteAttempt, FailAttempt) must
	// still apply, to the very state the same reports as ReportAttempt give.
	first := msgCounter // both runs send the same message ids
	now := newDriver(t)
	legacyTurns(t, now)
	msgCounter = first
	old := newDriver(t)
	old.legacy = true
	legacyTurns(t, old)
	if len(old.halts) != 0 || len(now.halts) != 0 {
		t.Fatalf("halts: old %v, new %v", old.halts, now.halts)
	}
	if !bytes.Equal(old.stateBytes(), now.stateBytes()) {
		t.Fatal("the old commands and ReportAttempt led to different states")
	}
}

func TestLegacyAttemptCommands_RepeatsAnswerAcrossVersions(t *testing.T) {
	failure := &fsmpb.AttemptResult{Outcome: &fsmpb.AttemptResult_Failure{Failure: &fsmpb.AttemptFailure{Error: "boom"}}}
	output := &fsmpb.AttemptResult{Outcome: &fsmpb.AttemptResult_ModelOutput{ModelOutput: &fsmpb.ModelOutput{Text: "hi"}}}
	report := func(ref *fsmpb.AttemptRef, res *fsmpb.AttemptResult) *fsmpb.Command {
		return &fsmpb.Command{Body: &fsmpb.Command_ReportAttempt{ReportAttempt: &fsmpb.ReportAttempt{Ref: ref, Result: res}}}
	}
	t.Run("fail committed by an older leader", func(t *testing.T) {
		d := newDriver(t)
		d.createSession("s", "", "hello")
		h := d.startNext("s", kRunModel).claim()
		ref := h.ref()
		d.do(legacyCommand(ref, failure))
		for _, cmd := range []*fsmpb.Command{legacyCommand(ref, failure), report(ref, failure)} {
			if res := d.try(cmd); res.Err != nil || !res.Replayed {
				t.Fatalf("repeat %T of the committed fail: %v replayed=%v; want the first answer", cmd.Body, res.Err, res.Replayed)
			}
		}
		for _, cmd := range []*fsmpb.Command{report(ref, output), legacyCommand(ref, output)} {
			if r := d.refused(cmd, CodeFailedPrecondition); !strings.Contains(r.Error(), "was a fail, not a complete") {
				t.Fatalf("a complete at the seq of a fail: %v", r)
			}
		}
	})
	t.Run("complete committed by an older leader", func(t *testing.T) {
		d := newDriver(t)
		d.createSession("s", "", "hello")
		h := d.startNext("s", kRunModel).claim()
		ref := h.ref()
		d.do(legacyCommand(ref, output))
		if res := d.try(report(ref, output)); res.Err != nil || !res.Replayed {
			t.Fatalf("ReportAttempt repeating the committed complete: %v replayed=%v", res.Err, res.Replayed)
		}
		if r := d.refused(report(ref, failure), CodeFailedPrecondition); !strings.Contains(r.Error(), "was a complete, not a fail") {
			t.Fatalf("a fail at the seq of a complete: %v", r)
		}
	})
}

func TestReportAttempt_RefusesAResultThatDoesNotFit(t *testing.T) {
	d := newDriver(t)
	d.createSession("s", "", "hello")
	h := d.startNext("s", kRunModel).claim()
	ref := h.ref()
	for name, res := range map[string]*fsmpb.AttemptResult{
		"no result":       nil,
		"empty result":    {},
		"a tool's result": {Outcome: &fsmpb.AttemptResult_ToolResult{ToolResult: &fsmpb.ToolResult{Content: "x"}}},
		"a summary":       {Outcome: &fsmpb.AttemptResult_Summary{Summary: "x"}},
	} {
		cmd := &fsmpb.Command{Body: &fsmpb.Command_ReportAttempt{ReportAttempt: &fsmpb.ReportAttempt{Ref: ref, Result: res}}}
		if r := d.refused(cmd, CodeInvalid); !strings.Contains(r.Error(), "a RunModel step cannot complete") {
			t.Fatalf("%s: %v", name, r)
		}
	}
	// Refused reports change nothing: the same seq still takes the output.
	d.do(&fsmpb.Command{Body: &fsmpb.Command_ReportAttempt{ReportAttempt: &fsmpb.ReportAttempt{Ref: ref, Result: &fsmpb.AttemptResult{
		Outcome: &fsmpb.AttemptResult_ModelOutput{ModelOutput: &fsmpb.ModelOutput{Text: "hi"}},
	}}}})
	wantStatus(t, d.session("s"), sIdle)
}
