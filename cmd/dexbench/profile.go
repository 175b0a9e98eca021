package main

import "github.com/dexhq/dex/cmd/internal/cpuprofile"

// startCPUProfile writes a CPU profile of dexbench to path until the
// returned stop is called (again: nothing); no path, no profile. The bench's
// Workers and watchers share the machine with the nodes, so what they cost
// is part of what a run measures.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	return cpuprofile.Start(path)
}
