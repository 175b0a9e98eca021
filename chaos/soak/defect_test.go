//go:build e2e

package soak

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestSoakCatchesADefectiveBuild runs a short soak against a dexd built
// with -tags soakdefect (a single-attempt tool's failed attempt is retried)
// and expects the checker to report the second execution.
func TestSoakCatchesADefectiveBuild(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	build := exec.Command("go", "build", "-tags", "soakdefect", "-o", bin+"/", "../../cmd/dexd")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the defective dexd: %v\n%s", err, out)
	}
	if err := os.Symlink(filepath.Join(binDir, "dexworker"), filepath.Join(bin, "dexworker")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	out := filepath.Join(dir, "out")
	rep, err := Run(ctx, Options{BinDir: bin, Out: out, TmpDir: dir, Duration: 20 * time.Second, Seed: 1, Clients: 2, Workers: 2, Kinds: []string{FTransfer}})
	if err != nil {
		t.Fatalf("soak: %v", err)
	}
	var got []string
	for _, v := range rep.Check.Violations {
		got = append(got, v.Kind)
	}
	if !slices.Contains(got, VSingleAttempt) {
		t.Fatalf("the checker missed the defect: violations %v\n%s", got, rep.Summary())
	}
	if _, err := os.Stat(filepath.Join(out, "logs", "ledger.jsonl")); err != nil {
		t.Fatalf("the logs of the failing soak were not kept: %v", err)
	}
	t.Logf("%s", rep.Summary())
}
