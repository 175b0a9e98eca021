package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A relative --cpu-profile lands in the data dir and holds a profile once
// stopped; a path that cannot be created is a clear error.
func TestStartCPUProfile_WritesUnderTheDataDir(t *testing.T) {
	dir := t.TempDir()
	stop, err := startCPUProfile("cpu.pprof", dir)
	if err != nil {
		t.Fatal(err)
	}
	stop()
	info, err := os.Stat(filepath.Join(dir, "cpu.pprof"))
	if err != nil || info.Size() == 0 {
		t.Fatalf("profile in the data dir: %v, %v; want a non-empty file", info, err)
	}

	_, err = startCPUProfile(filepath.Join(dir, "missing", "cpu.pprof"), dir)
	if err == nil || !strings.Contains(err.Error(), "--cpu-profile") || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("err = %v; want a --cpu-profile error naming the path", err)
	}
}
