package main

import (
	"path/filepath"

	"github.com/dexhq/dex/cmd/internal/cpuprofile"
)

// startCPUProfile writes a CPU profile of this process to path, a relative
// path being under dataDir (so one --cpu-profile serves every node of a
// local cluster), until the returned stop is called.
func startCPUProfile(path, dataDir string) (stop func(), err error) {
	if !filepath.IsAbs(path) {
		path = filepath.Join(dataDir, path)
	}
	return cpuprofile.Start(path)
}
