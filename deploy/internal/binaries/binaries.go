// Package binaries builds dexd, dexctl and dexworker once for a package's
// tests that run them, into a temporary directory that Main removes.
package binaries

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// Root is the repository.
var Root = func() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}()

var (
	once sync.Once
	dir  string
	err  error
)

// Build builds the commands the first time a test asks and returns their
// directory.
func Build(t testing.TB) string {
	t.Helper()
	once.Do(func() {
		if dir, err = os.MkdirTemp("", "dex-bin"); err != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", dir+string(os.PathSeparator), "./cmd/dexd", "./cmd/dexctl", "./cmd/dexworker")
		cmd.Dir = Root
		if out, e := cmd.CombinedOutput(); e != nil {
			err = fmt.Errorf("go build: %v\n%s", e, out)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// Main runs the package's tests, then removes what Build built.
func Main(m *testing.M) {
	code := m.Run()
	if dir != "" {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}
