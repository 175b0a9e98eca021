package harness

import (
	"os"
	"path/filepath"
	"testing"
)

// runFunc is a Tests whose Run is a function.
type runFunc func() int

func (f runFunc) Run() int { return f() }

// programs writes an executable file for each name into a new directory.
func programs(t *testing.T, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// With $DEX_BIN, the tests run on its programs, linked from a directory of
// their own that is gone afterwards; nothing is written into $DEX_BIN.
func TestRunWithBinaries_LinksTheProgramsOfDexBin(t *testing.T) {
	from := programs(t, "dexd", "dexctl")
	t.Setenv(BinEnv, from)
	var binDir string
	code := runWithBinaries(runFunc(func() int {
		for _, c := range []string{"dexd", "dexctl"} {
			got, err := filepath.EvalSymlinks(filepath.Join(binDir, c))
			if want, _ := filepath.EvalSymlinks(filepath.Join(from, c)); err != nil || got != want {
				t.Errorf("%s in the tests' bin dir is %q (%v); want %q", c, got, err, want)
			}
		}
		if err := os.WriteFile(filepath.Join(binDir, "extra"), nil, 0o644); err != nil {
			t.Errorf("the tests cannot add a file to their bin dir: %v", err)
		}
		return 7
	}), &binDir, []string{"dexd", "dexctl"})
	if code != 7 {
		t.Fatalf("exit code %d; want the tests' 7", code)
	}
	if _, err := os.Stat(binDir); !os.IsNotExist(err) {
		t.Errorf("the tests' bin dir %s is left behind (%v)", binDir, err)
	}
	if entries, _ := os.ReadDir(from); len(entries) != 2 {
		t.Errorf("$DEX_BIN holds %d files after the run; want its 2 programs", len(entries))
	}
}

// A program missing from $DEX_BIN, or not executable there, fails the run
// before any test: no test runs on another build than the one named.
func TestRunWithBinaries_RefusesADexBinWithoutTheProgram(t *testing.T) {
	notExec := programs(t, "dexd")
	if err := os.WriteFile(filepath.Join(notExec, "dexworker"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, dir := range map[string]string{"missing": programs(t, "dexd"), "not executable": notExec} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(BinEnv, dir)
			var binDir string
			ran := false
			code := runWithBinaries(runFunc(func() int { ran = true; return 0 }), &binDir, []string{"dexd", "dexworker"})
			if code != 1 || ran {
				t.Fatalf("exit code %d, tests ran: %v; want 1 and no test run", code, ran)
			}
		})
	}
}
