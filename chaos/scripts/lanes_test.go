package scripts

import (
	"go/build/constraint"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The two test lanes (see the Makefile): a _test.go file whose tests start
// processes begins with the line //go:build e2e and runs in make e2e, which
// finds it by that exact line (e2e-go.sh); every other file runs in make
// test. A test file that imports os/exec runs programs, so it must carry the
// tag rather than slow make test down.
func TestLanes_ATestThatRunsAProgramIsTaggedE2E(t *testing.T) {
	fset := token.NewFileSet()
	files := 0
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != repoRoot && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		files++
		e2e := false
		for _, g := range f.Comments {
			if g.Pos() > f.Package {
				break
			}
			for _, c := range g.List {
				if !constraint.IsGoBuild(c.Text) {
					continue
				}
				expr, err := constraint.Parse(c.Text)
				if err != nil {
					t.Errorf("%s: %v", path, err)
					continue
				}
				mentions := false
				expr.Eval(func(tag string) bool {
					mentions = mentions || tag == "e2e"
					return true
				})
				if mentions && c.Text != "//go:build e2e" {
					t.Errorf("%s: %q: a test of make e2e has the line //go:build e2e and no other condition", path, c.Text)
				}
				e2e = c.Text == "//go:build e2e"
			}
		}
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == "os/exec" && !e2e {
				t.Errorf("%s imports os/exec, so its tests run programs: begin it with //go:build e2e (make e2e runs it, make test does not)", path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("found %d test files under the repository: is the walk in the wrong place?", files)
	}
}

// repoRoot is the repository; the test runs in chaos/scripts.
const repoRoot = "../.."
