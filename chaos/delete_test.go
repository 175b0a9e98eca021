//go:build e2e

package chaos

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/chaos/harness"
)

// dexctlFails runs the CLI, which must fail, and returns what it printed on
// stderr.
func (e *env) dexctlFails(args ...string) string {
	e.t.Helper()
	full := append([]string{"--addr", strings.Join(e.cluster.GRPCAddrs(), ",")}, args...)
	out, err := exec.Command(filepath.Join(binDir, "dexctl"), full...).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		e.t.Fatalf("dexctl %s: %v, printed %q; want it to fail", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// newestSnapshot returns the state of a node's newest raft snapshot (nil
// when it has none yet).
func newestSnapshot(t *testing.T, n *harness.Node) []byte {
	t.Helper()
	dir := filepath.Join(n.DataDir, "raft", "snapshots")
	entries, _ := os.ReadDir(dir)
	best, bestIndex, bestTS := "", uint64(0), uint64(0)
	for _, en := range entries {
		parts := strings.Split(en.Name(), "-") // term-index-timestamp
		if !en.IsDir() || len(parts) != 3 {
			continue // a snapshot still being written ends in .tmp
		}
		index, err1 := strconv.ParseUint(parts[1], 10, 64)
		ts, err2 := strconv.ParseUint(parts[2], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		if index > bestIndex || (index == bestIndex && ts > bestTS) {
			best, bestIndex, bestTS = en.Name(), index, ts
		}
	}
	if best == "" {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(dir, best, "state.bin"))
	if err != nil {
		return nil // reaped meanwhile: the next look finds the newer one
	}
	return b
}

// A finished session deleted with dexctl is NotFound at once, and once the
// leader purged it, it is gone from every node's next snapshot and stays
// gone after a full restart. A session that is waiting is refused and kept.
func TestDelete_ADeletedSessionIsGoneFromEveryNodeAndFromTheNextSnapshot(t *testing.T) {
	e := newEnv(t, "--raft-snapshot-threshold", "4", "--raft-snapshot-interval", "300ms")
	e.startWorker(everyPolicyScript)
	kept := e.createSession("hello")
	doomed := e.createSession("hello")
	waiting := e.createSession("deny") // waits for an approval
	e.waitStatus(kept, sIdle, 30*time.Second)
	e.waitStatus(doomed, sIdle, 30*time.Second)
	e.waitStatus(waiting, sWaiting, 30*time.Second)

	if out := e.dexctlFails("session", "delete", waiting); !strings.Contains(out, "is waiting: only an idle, paused, errored or closed session can be deleted") {
		t.Fatalf("deleting a waiting session printed %q", out)
	}
	if err := e.client.DeleteSession(e.ctx(10*time.Second), waiting); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("the library deleting a waiting session: %v; want FailedPrecondition", err)
	}
	e.waitStatus(waiting, sWaiting, time.Second)
	if out := e.dexctlFails("session", "delete", "no-such-session"); !strings.Contains(out, `session "no-such-session" not found`) {
		t.Fatalf("deleting an unknown session printed %q", out)
	}

	var deleted struct {
		ID      string `json:"id"`
		Deleted bool   `json:"deleted"`
	}
	e.dexctl(&deleted, "session", "delete", doomed, "--json")
	if deleted.ID != doomed || !deleted.Deleted {
		t.Fatalf("dexctl session delete --json printed %+v", deleted)
	}
	if _, err := e.client.GetSession(e.ctx(10*time.Second), doomed); status.Code(err) != codes.NotFound {
		t.Fatalf("reading the deleted session: %v; want NotFound", err)
	}
	if out := e.dexctlFails("session", "show", doomed, "--json"); !strings.Contains(out, "not found") {
		t.Fatalf("dexctl session show of the deleted session printed %q", out)
	}

	// Every node snapshots after the purge: its newest snapshot holds a
	// session made after the delete and nothing of the deleted one.
	gone := map[string]bool{}
	var markers []string
	deadline := time.Now().Add(60 * time.Second)
	for len(gone) < len(e.cluster.Nodes) {
		if time.Now().After(deadline) {
			t.Fatalf("after 60 s only %v hold a snapshot taken after the purge", gone)
		}
		s, err := e.client.CreateSession(e.ctx(10*time.Second), &dexv1.CreateSessionRequest{SessionId: fmt.Sprintf("marker-%d", len(markers))})
		if err != nil {
			t.Fatal(err)
		}
		markers = append(markers, s.Id)
		time.Sleep(300 * time.Millisecond)
		for _, n := range e.cluster.Nodes {
			snap := newestSnapshot(t, n)
			if snap == nil || !bytes.Contains(snap, []byte(kept)) {
				continue
			}
			after := bytes.Contains(snap, []byte(markers[0]))
			if after && !bytes.Contains(snap, []byte(doomed)) {
				gone[n.ID] = true
			}
		}
	}

	e.fullRestart()
	if _, err := e.client.GetSession(e.ctx(20*time.Second), doomed); status.Code(err) != codes.NotFound {
		t.Fatalf("after a restart the deleted session reads: %v; want NotFound", err)
	}
	e.waitStatus(kept, sIdle, 10*time.Second)
	e.waitStatus(waiting, sWaiting, 10*time.Second)
	var list struct {
		Sessions []struct {
			ID string `json:"id"`
		} `json:"sessions"`
	}
	e.dexctl(&list, "session", "list", "--json")
	for _, s := range list.Sessions {
		if s.ID == doomed {
			t.Fatal("the deleted session is listed after a restart")
		}
	}
}
