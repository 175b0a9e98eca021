package fsm

import (
	"regexp"
	"testing"
	"time"
)

// A sleep's result is read by people and by the model: times, not epoch ms.
func TestSleepResultShowsReadableTimes(t *testing.T) {
	d := newDriver(t)
	tm := toolTurn(t, d, "s", call("c1", "sleep", `{"seconds": 60}`), kTimer)
	d.advance(time.Minute)
	d.do(d.fire(tm.Id))
	tr := toolResults(d.session("s"))["c1"]
	want := regexp.MustCompile(`^slept until \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \(fired at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\)$`)
	if tr == nil || !want.MatchString(tr.Text) {
		t.Fatalf("sleep result %v; want RFC 3339 times", tr)
	}
}
