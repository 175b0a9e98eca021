package fsm

import (
	"slices"
	"testing"

	"github.com/dexhq/dex/fsm/fsmpb"
)

func TestAppliedReportsClaimsEndsAndFinishes(t *testing.T) {
	d := newDriver(t)
	got := recordApplied(d)
	last := func() *Applied { return (*got)[len(*got)-1] }

	d.createSession("s1", "", "hello")
	h := d.startNext("s1", fsmpb.StepKind_STEP_KIND_RUN_MODEL)
	if a := last(); a.Claimed != nil || a.Ended != nil || a.Finished != nil {
		t.Fatalf("StartAttempt reported %+v; want no claim, end or finish", a)
	}
	h.claim()
	if a := last(); !slices.Equal(a.Claimed, []AttemptKey{{h.st, 1}}) || a.Ended != nil {
		t.Fatalf("ClaimAttempt reported claimed %v ended %v; want %s/1 claimed", a.Claimed, a.Ended, h.st)
	}
	// A failure that is retried ends the attempt but not the Step.
	h.fail(fsmpb.ErrorType_ERROR_TYPE_RATE_LIMIT, "slow down")
	if a := last(); !slices.Equal(a.Ended, []AttemptKey{{h.st, 1}}) || a.Finished != nil {
		t.Fatalf("a retried failure reported ended %v finished %v", a.Ended, a.Finished)
	}
	// A replayed report changes nothing and reports nothing.
	h.seq--
	h.d.do(h.failCmd(fsmpb.ErrorType_ERROR_TYPE_RATE_LIMIT, "slow down"))
	if a := last(); a.Ended != nil {
		t.Fatalf("a replayed report reported ended %v", a.Ended)
	}
	h2 := d.startNext("s1", fsmpb.StepKind_STEP_KIND_RUN_MODEL)
	h2.answer("done")
	if a := last(); !slices.Equal(a.Ended, []AttemptKey{{h2.st, 2}}) || !slices.Equal(a.Finished, []string{h2.st}) {
		t.Fatalf("a success reported ended %v finished %v; want %s/2 and %s", a.Ended, a.Finished, h2.st, h2.st)
	}
	// A rejected command reports nothing.
	d.refused(h2.failCmd(fsmpb.ErrorType_ERROR_TYPE_SERVER_ERROR, "late"), CodeFailedPrecondition)
	if a := last(); a.Ended != nil || a.Finished != nil {
		t.Fatalf("a rejected command reported %+v", a)
	}
}

// A cancel ends the running attempt: its live output is abandoned and the
// attempt counted, as a failure's is.
func TestAppliedReportsACancelledAttemptEnded(t *testing.T) {
	d := newDriver(t)
	got := recordApplied(d)
	d.createSession("s1", "", "hello")
	h := d.startNext("s1", fsmpb.StepKind_STEP_KIND_RUN_MODEL)
	d.do(cancelCmd("s1", "ops", "wrong task"))
	a := (*got)[len(*got)-1]
	if !slices.Equal(a.Ended, []AttemptKey{{h.st, 1}}) || !slices.Equal(a.Finished, []string{h.st}) {
		t.Fatalf("a cancel reported ended %v finished %v; want %s/1 and %s", a.Ended, a.Finished, h.st, h.st)
	}
}
