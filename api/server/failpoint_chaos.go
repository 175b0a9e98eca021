//go:build chaos

package server

import (
	"fmt"

	gofail "go.etcd.io/gofail/runtime"

	"github.com/dexhq/dex/dispatch"
)

// The chaos build of dexd (go build -tags chaos) compiles in failpoints at
// the moments of the crash matrix a signal cannot hit reliably. They are
// go.etcd.io/gofail runtime failpoints, registered here by name, so their
// terms come from the environment at start:
//
//	GOFAIL_FAILPOINTS='dexBeforeCommitResult=sleep(3000)'
//	GOFAIL_FAILPOINTS='dexBeforeCommitResult=1*panic("boom");dexAfterWaitResolved=sleep("2s")'
//
// and, with GOFAIL_HTTP=127.0.0.1:PORT, can be changed while dexd runs
// (PUT /NAME with the terms as body, DELETE /NAME, GET / lists them). See
// deploy/README.md for the term syntax.
var failpoints = map[string]*gofail.Failpoint{}

func init() {
	for _, name := range FailpointNames {
		failpoints[name] = gofail.NewFailpoint(name)
	}
	// The timer wheel lives in dispatch, which does not import this
	// package: it calls the same failpoints through its hook.
	dispatch.SetFailpointHook(failpoint)
}

// failpoint evaluates the failpoint name: it sleeps, panics or does nothing
// as its terms say. A name that is not registered is a programming error.
func failpoint(name string) {
	fp, ok := failpoints[name]
	if !ok {
		panic(fmt.Sprintf("failpoint %q is not registered", name))
	}
	// The value of a return(...) term is not used: every failpoint of
	// dexd is a moment, not a value.
	_, _ = fp.Acquire()
}

// FailpointsCompiled reports whether this build has failpoints.
const FailpointsCompiled = true
