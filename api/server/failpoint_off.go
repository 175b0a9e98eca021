//go:build !chaos

package server

// failpoint does nothing outside the chaos build; the compiler removes the
// call. See failpoint_chaos.go.
func failpoint(string) {}

// FailpointsCompiled reports whether this build has failpoints.
const FailpointsCompiled = false
