//go:build e2e

package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// One 720,000-byte message whose model copies it into three tool calls, whose
// results copy it again: the next model input is over the limit, and the
// session errors keeping a turn of several MB. Snapshots taken after that
// must restore: every node, SIGKILLed together, restarts from its own
// snapshot and catches up, `dexd verify` calls each data dir intact, and a
// backup taken then inspects and restores into another cluster.
func TestBigRows_ASessionOfSeveralMBLeavesEverySnapshotAndBackupRestorable(t *testing.T) {
	e := newEnv(t, "--raft-snapshot-threshold", "16", "--raft-snapshot-interval", "1s", "--raft-trailing-logs", "8")
	copyArg := fmt.Sprintf(`{"q": %q}`, strings.Repeat("c", 720_000))
	e.startWorker(fmt.Sprintf(`{"turns": [
 {"match": "big", "prefix": true, "outputs": [{"tool_calls": [
   {"tool": "lookup", "arguments": %[1]s}, {"tool": "lookup", "arguments": %[1]s}, {"tool": "lookup", "arguments": %[1]s}]}]}
], "default": [{"text": "hi"}]}`, copyArg))

	big := e.createSession("big" + strings.Repeat("m", 720_000-3))
	e.waitFor(big, 60*time.Second, "errored over its model input limit, its turn kept", func(r *dexv1.GetSessionResponse) bool {
		return r.Session.Status == sErrored && r.Session.Turn != nil && r.Session.LastErrorType == dexv1.ErrorType_ERROR_TYPE_CONTEXT_LENGTH
	})
	errored := time.Now()
	// More entries than the snapshot threshold, then a snapshot on every node.
	for range 6 {
		e.waitStatus(e.createSession("hello"), sIdle, 30*time.Second)
	}
	for _, n := range e.cluster.Nodes {
		waitSnapshotAfter(t, n.DataDir, errored, 30*time.Second)
	}

	file := filepath.Join(t.TempDir(), "dex.backup")
	if out, ok := dexctlAt(t, e.cluster.GRPCAddrs(), "snapshot", "save", file); !ok {
		t.Fatalf("snapshot save: %s", out)
	}
	if out, ok := dexctlAt(t, nil, "snapshot", "inspect", file); !ok || !strings.Contains(out, "errored 1") {
		t.Fatalf("snapshot inspect printed %q; want the errored session counted", out)
	}
	want := e.get(big)

	e.cluster.KillAll()
	for _, n := range e.cluster.Nodes {
		if out, code := dexdVerify(t, n.DataDir); code != 0 || !strings.Contains(out, "restores (") {
			t.Fatalf("dexd verify %s exited %d: %s", n.ID, code, out)
		}
	}
	if err := e.cluster.Start(); err != nil {
		t.Fatal(err)
	}
	e.waitReady()
	got := e.get(big)
	if got.Session.Status != sErrored || len(got.Session.History) == 0 || got.Session.History[0].Text != want.Session.History[0].Text {
		t.Fatalf("after the restart the session is %v with %d history entries", got.Session.Status, len(got.Session.History))
	}
	e.waitStatus(e.createSession("hello"), sIdle, 30*time.Second) // the cluster serves after the restart

	// The backup restores into another cluster, the session readable there.
	other := newEnv(t)
	if out, ok := dexctlAt(t, other.cluster.GRPCAddrs(), "snapshot", "restore", file, "--yes", "--allow-other-cluster"); !ok {
		t.Fatalf("snapshot restore into another cluster: %s", out)
	}
	other.waitReady()
	if r := other.get(big); r.Session.Status != sErrored || r.Session.History[0].Text != want.Session.History[0].Text {
		t.Fatalf("the restored session is %v", r.Session.Status)
	}
}

// waitSnapshotAfter waits until the node's data dir holds a snapshot
// written after t0.
func waitSnapshotAfter(t *testing.T, dataDir string, t0 time.Time, d time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(d); ; time.Sleep(200 * time.Millisecond) {
		metas, _ := filepath.Glob(filepath.Join(dataDir, "raft", "snapshots", "*", "meta.json"))
		for _, m := range metas {
			if fi, err := os.Stat(m); err == nil && fi.ModTime().After(t0) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s took no snapshot within %s", dataDir, d)
		}
	}
}
