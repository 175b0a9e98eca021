package client

import (
	"go/build"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The Go Worker library depends on the wire only: nothing it imports,
// directly or not, is the cluster's state machine, its store (B-trees under go-memdb's schema) or
// any other part of the server. A Worker built with it never changes with
// the cluster's internals.
func TestWorkerLibraryDependsOnTheWireOnly(t *testing.T) {
	root, module := moduleRoot(t)
	own, others := imports(t, root, module, module+"/api/client")
	for pkg, by := range own {
		if !strings.HasPrefix(pkg, module+"/api/") || strings.HasPrefix(pkg, module+"/api/server") {
			t.Errorf("api/client imports %s (through %s): it may import the wire types and the api/ packages they need only", pkg, by)
		}
	}
	for pkg, by := range others {
		if strings.Contains(pkg, "go-memdb") || strings.Contains(pkg, "tidwall/btree") || strings.Contains(pkg, "hashicorp/raft") {
			t.Errorf("api/client imports %s (through %s): that is the cluster's store", pkg, by)
		}
	}
	for _, want := range []string{"/api/dexv1", "/api/wirerules"} {
		if _, ok := own[module+want]; !ok {
			t.Errorf("the walk from api/client missed %s, which it imports", module+want)
		}
	}
}

// The same walk finds the state machine and its store where they are
// imported: the API server reads them. The server does not import the
// client library: both sides share the wire types and api/wirerules only.
func TestDependencyWalkFindsTheStateMachine(t *testing.T) {
	root, module := moduleRoot(t)
	own, others := imports(t, root, module, module+"/api/server")
	if by, ok := own[module+"/api/client"]; ok {
		t.Errorf("api/server imports api/client (through %s)", by)
	}
	if _, ok := own[module+"/fsm"]; !ok {
		t.Errorf("the walk from api/server did not reach fsm")
	}
	for _, store := range []string{"github.com/hashicorp/go-memdb", "github.com/tidwall/btree"} {
		if _, ok := others[store]; !ok {
			t.Errorf("the walk from api/server did not reach %s", store)
		}
	}
}

// moduleRoot is the directory of the module's go.mod and the module's path.
func moduleRoot(t *testing.T) (dir, module string) {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				if m, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
					return dir, strings.TrimSpace(m)
				}
			}
			t.Fatalf("%s names no module", filepath.Join(dir, "go.mod"))
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// imports walks the non-test imports of pkg, as a build for this platform
// sees them, through the module's own packages (read from their
// directories). own holds every module package reached, others every
// package outside the module that a module package imports; each maps to
// the package that first imported it.
func imports(t *testing.T, root, module, pkg string) (own, others map[string]string) {
	t.Helper()
	own, others = map[string]string{pkg: ""}, map[string]string{}
	for queue := []string{pkg}; len(queue) > 0; queue = queue[1:] {
		p := queue[0]
		rel := strings.TrimPrefix(strings.TrimPrefix(p, module), "/")
		bp, err := build.ImportDir(filepath.Join(root, filepath.FromSlash(rel)), 0)
		if err != nil {
			t.Fatalf("reading %s: %v", p, err)
		}
		for _, imp := range bp.Imports {
			switch {
			case imp == module || strings.HasPrefix(imp, module+"/"):
				if _, ok := own[imp]; !ok {
					own[imp] = p
					queue = append(queue, imp)
				}
			default:
				if _, ok := others[imp]; !ok {
					others[imp] = p
				}
			}
		}
	}
	return own, others
}
