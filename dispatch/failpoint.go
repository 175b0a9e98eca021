package dispatch

// failpointHook is called at the named moments of the timer wheel. It does
// nothing unless the chaos build of the API server installs its gofail
// failpoints (api/server/failpoint_chaos.go); dispatch does not import it.
var failpointHook = func(string) {}

// FailpointAfterWaitResolved is the failpoint the timer wheel evaluates
// right after a FireTimer committed.
const FailpointAfterWaitResolved = "dexAfterWaitResolved"

// SetFailpointHook installs f as the failpoint hook. Call it at init, before
// any timer wheel runs.
func SetFailpointHook(f func(name string)) { failpointHook = f }
