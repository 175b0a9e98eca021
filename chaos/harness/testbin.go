package harness

import (
	"fmt"
	"os"
	"os/exec"
)

// Tests is what a TestMain runs: *testing.M.
type Tests interface{ Run() int }

// RunWithBinaries is a TestMain for tests that start Dex's own programs:
// it builds the named commands of this module (e.g. "dexd", "dexworker")
// into a temporary directory, sets *binDir to it, runs the tests, removes
// the directory and exits with the tests' code. The commands are named by
// import path, so it works from any package directory.
func RunWithBinaries(m Tests, binDir *string, cmds ...string) {
	os.Exit(runWithBinaries(m, binDir, cmds))
}

func runWithBinaries(m Tests, binDir *string, cmds []string) int {
	dir, err := os.MkdirTemp("", "dex-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	args := []string{"build", "-o", dir + string(os.PathSeparator)}
	for _, c := range cmds {
		args = append(args, "github.com/dexhq/dex/cmd/"+c)
	}
	build := exec.Command("go", args...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build binaries:", err)
		return 1
	}
	*binDir = dir
	return m.Run()
}
