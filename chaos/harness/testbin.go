package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Tests is what a TestMain runs: *testing.M.
type Tests interface{ Run() int }

// BinEnv names a directory holding Dex's programs already built from this
// checkout: make e2e builds them into bin/ and sets it, as it does for the
// Python and TypeScript tests.
const BinEnv = "DEX_BIN"

// RunWithBinaries is a TestMain for tests that start Dex's own programs:
// it builds the named commands of this module (e.g. "dexd", "dexworker")
// into a temporary directory, sets *binDir to it, runs the tests, removes
// the directory and exits with the tests' code. The commands are named by
// import path, so it works from any package directory. Where $DEX_BIN is
// set, the directory links to its programs instead of building them; tests
// may still add files to *binDir (a chaos build in binDir/chaos) without
// touching $DEX_BIN.
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
	if err := Binaries(dir, cmds...); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	*binDir = dir
	return m.Run()
}

// Binaries puts the named commands of this module into dir: links to the
// programs of $DEX_BIN where it is set, else builds them there.
func Binaries(dir string, cmds ...string) error {
	if from := os.Getenv(BinEnv); from != "" {
		return linkBinaries(from, dir, cmds)
	}
	return buildBinaries(dir, cmds)
}

func buildBinaries(dir string, cmds []string) error {
	args := []string{"build", "-o", dir + string(os.PathSeparator)}
	for _, c := range cmds {
		args = append(args, "github.com/dexhq/dex/cmd/"+c)
	}
	build := exec.Command("go", args...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("build binaries: %w", err)
	}
	return nil
}

// linkBinaries links dir/CMD to from/CMD for each command, which must be
// there: a missing one fails the run rather than testing another build.
func linkBinaries(from, dir string, cmds []string) error {
	from, err := filepath.Abs(from)
	if err != nil {
		return err
	}
	for _, c := range cmds {
		src := filepath.Join(from, c)
		if info, err := os.Stat(src); err != nil || !info.Mode().IsRegular() || info.Mode().Perm()&0o111 == 0 {
			return fmt.Errorf("$%s=%s has no program %s (make build-go builds it there)", BinEnv, from, c)
		}
		if err := os.Symlink(src, filepath.Join(dir, c)); err != nil {
			return err
		}
	}
	return nil
}
