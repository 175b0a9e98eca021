//go:build e2e

package chaos

import (
	"bytes"
	"context"
	"github.com/dexhq/dex/chaos/harness"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// plainBin is a bin dir with the normal builds only: the package's binDir
// may also hold the chaos build another test made in binDir/chaos.
func plainBin(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, b := range []string{"dexd", "dexworker", "dexctl"} {
		if err := os.Symlink(filepath.Join(binDir, b), filepath.Join(dir, b)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestMatrix_ChaosBuildIsFoundByItsBuildTags(t *testing.T) {
	if _, err := harness.ChaosDexd(plainBin(t)); err == nil {
		t.Fatal("the normal build of dexd passed for the chaos build")
	}
	if _, err := harness.ChaosDexd(t.TempDir()); err == nil {
		t.Fatal("an empty directory passed for the chaos build")
	}
}

// A failpoint cell without the chaos build is n/a with the reason; a cell
// runs for real and passes; its notes are written.
func TestMatrix_RunsCellsAndSaysWhyOneIsNotApplicable(t *testing.T) {
	cells, err := SelectCells([]string{ColTakeover}, "idle session|after the Worker sent its result")
	if err != nil || len(cells) != 2 {
		t.Fatal(cells, err)
	}
	out := t.TempDir()
	var progress bytes.Buffer
	res := RunMatrix(context.Background(), MatrixOptions{BinDir: plainBin(t), Out: out, Progress: &progress}, cells)
	if res[0].Result != ResultPass || len(res[0].Takeovers) != 1 {
		t.Fatalf("idle session × takeover: %+v\n%s", res[0], progress.String())
	}
	if res[1].Result != ResultNA || !strings.Contains(res[1].Reason, "needs the chaos build") {
		t.Fatalf("a failpoint cell on the normal build: %+v", res[1])
	}
	if !strings.Contains(progress.String(), "[1/2] takeover | idle session | waiting for a user message ... pass") {
		t.Fatalf("progress: %q", progress.String())
	}
	notes, err := os.ReadFile(filepath.Join(out, "cells", "takeover-idle-session-waiting-for-a-user-message.txt"))
	if err != nil || !strings.Contains(string(notes), "SIGKILL leader") || !strings.Contains(string(notes), "rejoined") {
		t.Fatalf("cell notes: %s %v", notes, err)
	}
}
