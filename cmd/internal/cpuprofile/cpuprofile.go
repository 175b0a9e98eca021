// Package cpuprofile is the --cpu-profile flag of Dex's commands.
package cpuprofile

import (
	"fmt"
	"os"
	"runtime/pprof"
	"sync"
)

// Start writes a CPU profile of this process to path until the returned
// stop is called; stop may be called again, and then does nothing.
func Start(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpu-profile: %v", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpu-profile %s: %v", path, err)
	}
	return sync.OnceFunc(func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}), nil
}
