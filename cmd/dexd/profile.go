package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
)

// startCPUProfile writes a CPU profile of this process to path, a relative
// path being under dataDir (so one --cpu-profile serves every node of a
// local cluster), until the returned stop is called.
func startCPUProfile(path, dataDir string) (stop func(), err error) {
	if !filepath.IsAbs(path) {
		path = filepath.Join(dataDir, path)
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpu-profile: %v", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpu-profile %s: %v", path, err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}
