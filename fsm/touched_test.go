package fsm

import (
	"slices"
	"testing"
	"time"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// recordApplied makes the driver's state machine record every OnApplied
// report; the callback reads the state, as the broker does.
func recordApplied(d *driver) *[]*Applied {
	var got []*Applied
	d.f.opts.OnApplied = func(a *Applied) {
		_ = d.f.State().Meta() // reading the state from the callback does not deadlock
		got = append(got, a)
	}
	return &got
}

func TestAppliedReportsTheRowsACommandWrote(t *testing.T) {
	d := newDriver(t)
	got := recordApplied(d)

	d.createSession("s1", "", "hello")
	st := d.queued("s1", fsmpb.StepKind_STEP_KIND_RUN_MODEL)
	if len(*got) != 1 {
		t.Fatalf("%d reports for one entry", len(*got))
	}
	a := (*got)[0]
	if a.Index != d.index || !slices.Equal(a.Sessions, []string{"s1"}) || !slices.Equal(a.Steps, []string{st.Id}) {
		t.Fatalf("CreateSession reported %+v; want index %d, session s1 and step %s", a, d.index, st.Id)
	}

	d.start(st)
	if a := (*got)[1]; !slices.Equal(a.Steps, []string{st.Id}) {
		t.Fatalf("StartAttempt reported steps %v; want only %s", a.Steps, st.Id)
	}

	// A rejected command wrote nothing.
	d.refused(&fsmpb.Command{Body: &fsmpb.Command_StartAttempt{StartAttempt: &fsmpb.StartAttempt{
		StepId: st.Id, Attempt: 1, WorkerId: "w1", Epoch: d.epoch,
	}}}, CodeFailedPrecondition)
	if a := (*got)[2]; a.Steps != nil || a.Sessions != nil || a.Index != d.index {
		t.Fatalf("a rejected command reported %+v; want nothing written", a)
	}

	// A command on no session or Step reports none.
	d.newEpoch()
	if a := (*got)[3]; a.Steps != nil || a.Sessions != nil {
		t.Fatalf("BumpEpoch reported %+v", a)
	}

	// Restore reports that everything may have changed.
	d.f.NotifyRestored()
	if a := (*got)[4]; !a.Restored {
		t.Fatalf("NotifyRestored reported %+v", a)
	}
}

func TestDueIndexesHoldOnlyWhatIsOwed(t *testing.T) {
	d := newDriver(t)
	// Two timers, the later one created first.
	for _, c := range []struct{ id, secs string }{{"late", "120"}, {"early", "60"}} {
		d.createSession(c.id, "", "go")
		d.startNext(c.id, fsmpb.StepKind_STEP_KIND_RUN_MODEL).answer("sleeping", call("c1", BuiltinSleep, `{"seconds": `+c.secs+`}`))
	}
	d.createSession("idle", "", "")
	timers := d.f.State().WaitingTimers()
	if len(timers) != 2 || timers[0].SessionId != "early" || timers[1].SessionId != "late" {
		t.Fatalf("waiting timers %v; want early then late", timers)
	}
	d.advance(time.Minute)
	d.do(d.fire(timers[0].Id))
	if timers := d.f.State().WaitingTimers(); len(timers) != 1 || timers[0].SessionId != "late" {
		t.Fatalf("after the fire, waiting timers %v; want only late", timers)
	}

	if got := d.f.State().ErroredToResume(); len(got) != 0 {
		t.Fatalf("sessions to resume %v; want none", got)
	}
	d.createSession("e1", "", "hi")
	for range ModelMaxAttempts {
		d.startNext("e1", fsmpb.StepKind_STEP_KIND_RUN_MODEL).fail(fsmpb.ErrorType_ERROR_TYPE_RATE_LIMIT, "slow down")
	}
	got := d.f.State().ErroredToResume()
	if len(got) != 1 || got[0].Id != "e1" || got[0].ResumeAtMs == 0 {
		t.Fatalf("sessions to resume %v; want e1", got)
	}
	if at, ok := ResumeDue(got[0]); !ok || at != got[0].ResumeAtMs {
		t.Fatalf("ResumeDue = %d, %v", at, ok)
	}
	d.now = got[0].ResumeAtMs
	d.do(&fsmpb.Command{Body: &fsmpb.Command_ResumeErrored{ResumeErrored: &fsmpb.ResumeErrored{SessionId: "e1", Epoch: d.epoch}}})
	if got := d.f.State().ErroredToResume(); len(got) != 0 {
		t.Fatalf("after the resume, sessions to resume %v; want none", got)
	}
}
