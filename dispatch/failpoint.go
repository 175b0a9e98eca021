package dispatch

// failpointHook is called at the named moments of the timer wheel. It does
// nothing unless the chaos build of the API server installs its gofail
// failpoints (api/server/failpoint_chaos.go); dispatch does not import it.
var failpointHook = func(string) {}

// FailpointAfterWaitResolved is the failpoint the timer wheel evaluates
// right after a FireTimer committed.
const FailpointAfterWaitResolved = "dexAfterWaitResolved"

// FailpointBeforeScheduleFire is evaluated right before the timer wheel
// proposes a FireScheduleSlot, FailpointAfterScheduleFire right after one
// committed: a leader killed there dies at a schedule's firing moment.
const (
	FailpointBeforeScheduleFire = "dexBeforeScheduleFire"
	FailpointAfterScheduleFire  = "dexAfterScheduleFire"
)

// SetFailpointHook installs f as the failpoint hook. Call it at init, before
// any timer wheel runs.
func SetFailpointHook(f func(name string)) { failpointHook = f }
