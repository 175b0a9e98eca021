package scripts

import (
	"go/ast"
	"go/build/constraint"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
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

// The tests of the failpoint build (//go:build chaos) run in make test by
// name: every one of them is named in the Makefile's CHAOS_TAGGED_TESTS.
func TestLanes_EveryTestOfTheFailpointBuildRunsInMakeTest(t *testing.T) {
	mk, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	var listed string
	for _, line := range strings.Split(string(mk), "\n") {
		if strings.HasPrefix(line, "CHAOS_TAGGED_TESTS = ") {
			listed = line
		}
	}
	if listed == "" {
		t.Fatal("the Makefile has no CHAOS_TAGGED_TESTS line")
	}
	fset := token.NewFileSet()
	found := 0
	err = filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
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
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		if len(f.Comments) == 0 || f.Comments[0].Pos() > f.Package || f.Comments[0].List[0].Text != "//go:build chaos" {
			return nil
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Test") {
				continue
			}
			found++
			if !strings.Contains(listed, fn.Name.Name+"|") && !strings.Contains(listed, fn.Name.Name+")") {
				t.Errorf("%s: %s runs in no lane: add it to CHAOS_TAGGED_TESTS in the Makefile", path, fn.Name.Name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found == 0 {
		t.Fatal("found no test of the failpoint build: is the walk in the wrong place?")
	}
}
