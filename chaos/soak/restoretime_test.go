package soak

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/dexhq/dex/fsm"
)

// writeNodeSnapshot gives dataDir a raft snapshot of an empty state at
// index and returns its size.
func writeNodeSnapshot(t *testing.T, dataDir string, index uint64) int64 {
	t.Helper()
	snaps, err := raft.NewFileSnapshotStore(filepath.Join(dataDir, "raft"), 2, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	sink, err := snaps.Create(raft.SnapshotVersionMax, index, 1, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := fsm.New(fsm.Options{}).Snapshot().Persist(sink); err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	metas, err := snaps.List()
	if err != nil || len(metas) == 0 {
		t.Fatalf("the snapshot written is not listed: %v", err)
	}
	return metas[0].Size
}

func TestRestoreOnceRestoresTheNewestSnapshot(t *testing.T) {
	dir := t.TempDir()
	writeNodeSnapshot(t, dir, 7)
	size := writeNodeSnapshot(t, dir, 12)
	got, err := RestoreOnce(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.Index != 12 || got.Size != size || got.Took <= 0 || got.CPU <= 0 {
		t.Fatalf("RestoreOnce = %+v; want index 12, size %d, a wall and a CPU time", got, size)
	}
}

func TestRestoreOnceRefusesADirWithoutASnapshot(t *testing.T) {
	dir := t.TempDir()
	if _, err := RestoreOnce(dir); err == nil || !strings.Contains(err.Error(), "has no snapshot yet") {
		t.Fatalf("RestoreOnce of an empty data dir = %v; want an error saying it has no snapshot", err)
	}
}

// fakeChild is a command that prints, on its n-th run, the n-th of nanos
// as a restore's timing, and writes the arguments it was given to args.
func fakeChild(t *testing.T, nanos string) (cmd []string, args string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "child")
	script := `n=$(cat "$0.n" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$0.n"; echo "$@" > "$0.args"
set -- ` + nanos + `
eval "ns=\${$n}"
echo "{\"size\":100,\"index\":9,\"restore_ns\":$ns,\"restore_cpu_ns\":$((ns / 1000 * 1000 + 1000000000 - n * 100000000))}"
`
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return []string{"sh", path}, path + ".args"
}

func TestChildRestoreTimerKeepsTheShortestOfItsTries(t *testing.T) {
	cmd, args := fakeChild(t, "30000000 12000000 45000000")
	got, err := ChildRestoreTimer(cmd, 3)(context.Background(), "/data/n1")
	if err != nil {
		t.Fatal(err)
	}
	// CPU times: 930, 812 and 745 ms; the shortest of each is kept,
	// though they come from different tries.
	if want := (RestoreTiming{Size: 100, Index: 9, Took: 12 * time.Millisecond, CPU: 745 * time.Millisecond}); got != want {
		t.Fatalf("timing = %+v; want %+v (the shortest wall and CPU times of three)", got, want)
	}
	if b, err := os.ReadFile(args); err != nil || strings.TrimSpace(string(b)) != "--data-dir /data/n1" {
		t.Fatalf("the child was given %q (%v); want --data-dir /data/n1", b, err)
	}
}

func TestChildRestoreTimerFailsWithWhatTheChildSaid(t *testing.T) {
	for _, c := range []struct {
		name, script, want string
	}{
		{"exits 1", `echo "no snapshot here" >&2; exit 1`, "no snapshot here"},
		{"prints no timing", `echo hello`, `printed "hello", not a restore's timing`},
		{"prints no time", `echo '{"size":1,"index":2}'`, "not a restore's timing"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ChildRestoreTimer([]string{"sh", "-c", c.script, "child"}, 3)(context.Background(), t.TempDir())
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v; want one saying %q", err, c.want)
			}
		})
	}
	if _, err := ChildRestoreTimer(nil, 1)(context.Background(), t.TempDir()); err == nil {
		t.Fatal("a timer without a command timed a restore")
	}
}
