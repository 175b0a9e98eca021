//go:build e2e

package chaos

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/chaos/harness"
)

// The nap's timer must stay pending from the save through the last restore
// (about 2 s on 2 cores, the new cluster's start included), then fire in the
// new cluster, which the test waits for: 10 s leaves a wide margin without
// a long wait.
const backupScript = `{"turns": [
 {"match": "hello", "outputs": [{"text": "hi there"}]},
 {"match": "again", "outputs": [{"text": "hello again"}]},
 {"match": "deploy", "outputs": [
   {"tool_calls": [{"tool": "deploy", "arguments": {"env": "prod"}}]},
   {"text": "deployed"}]},
 {"match": "nap", "outputs": [
   {"tool_calls": [{"tool": "sleep", "arguments": {"seconds": 10}}]},
   {"text": "woke up"}]}
]}`

// dexctlAt runs the CLI against addrs; it returns what it printed and
// whether it succeeded.
func dexctlAt(t *testing.T, addrs []string, args ...string) (string, bool) {
	t.Helper()
	full := append([]string{"--addr", strings.Join(addrs, ",")}, args...)
	out, err := exec.Command(filepath.Join(binDir, "dexctl"), full...).CombinedOutput()
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("dexctl %s: %v", strings.Join(args, " "), err)
		}
		return string(out), false
	}
	return string(out), true
}

// backupParts cuts a backup file into its version line, its header line
// and its state, without the checksum line (72 bytes) that ends it.
func backupParts(t *testing.T, raw []byte) (first, header, state []byte) {
	t.Helper()
	first, rest, ok1 := bytes.Cut(raw, []byte("\n"))
	header, rest, ok2 := bytes.Cut(rest, []byte("\n"))
	if !ok1 || !ok2 || len(rest) < 72 {
		t.Fatalf("not a backup: %.40q", raw)
	}
	return first, header, rest[:len(rest)-72]
}

// withHeaderCluster is the backup raw with only the cluster id on its
// header line changed from one cluster to another.
func withHeaderCluster(t *testing.T, raw []byte, from, to string) []byte {
	t.Helper()
	first, header, _ := backupParts(t, raw)
	edited := bytes.Replace(header, []byte(`"cluster_id":"`+from+`"`), []byte(`"cluster_id":"`+to+`"`), 1)
	if bytes.Equal(edited, header) {
		t.Fatalf("the header %s names no cluster %s", header, from)
	}
	return slices.Concat(raw[:len(first)+1], edited, raw[len(first)+1+len(header):])
}

// asFormat1 writes the backup raw the way format 1 did: the same header and
// state, the checksum of the state alone.
func asFormat1(t *testing.T, raw []byte) []byte {
	t.Helper()
	_, header, state := backupParts(t, raw)
	sum := sha256.Sum256(state)
	return fmt.Appendf(nil, "DEXBACKUP 1\n%s\n%sSHA256 %s\n", header, state, hex.EncodeToString(sum[:]))
}

// writeTemp writes data to a new file and returns its path.
func writeTemp(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// restoreRaw sends a backup to the leader's RestoreSnapshot as it is, past
// dexctl's own checks.
func restoreRaw(e *env, raw []byte, req *dexv1.RestoreSnapshotRequest) error {
	stream, err := dexv1.NewAdminServiceClient(e.conn).RestoreSnapshot(e.ctx(60 * time.Second))
	if err != nil {
		return err
	}
	req.Data = raw
	if err := stream.Send(req); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	_, err = stream.CloseAndRecv()
	return err
}

type inspected struct {
	Index     uint64 `json:"index"`
	ClusterID string `json:"cluster_id"`
	Epoch     uint64 `json:"epoch"`
	Counts    struct {
		Sessions      map[string]int `json:"sessions"`
		Steps         map[string]int `json:"steps"`
		TimersPending int            `json:"timers_pending"`
		History       int            `json:"history_entries"`
		Tools         int            `json:"tools"`
	} `json:"counts"`
}

func clusterIDOf(t *testing.T, e *env) (id string, epoch uint64) {
	t.Helper()
	// Both from the leader: NodeState and Status answer from the node that
	// takes them, and a follower may not have applied the id yet.
	conn, err := grpc.NewClient(e.leader().GRPCAddr, e.cluster.ConnOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	admin := dexv1.NewAdminServiceClient(conn)
	ns, err := admin.NodeState(e.ctx(10*time.Second), &dexv1.NodeStateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := admin.Status(e.ctx(10*time.Second), &dexv1.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return ns.ClusterId, st.Epoch
}

// A backup taken with dexctl brings every session, Step and wait back into
// a brand-new cluster after the old one is lost (every node SIGKILLed and
// its data dir wiped), and the sessions go on there: the pending approval
// runs its tool once approved, the timer fires, a new message is answered.
func TestBackup_SaveWipeRestoreInANewClusterAndTheDemoGoesOn(t *testing.T) {
	e := newEnv(t)
	e.startWorker(backupScript)
	talk := e.createSession("hello")
	approval := e.createSession("deploy")
	timer := e.createSession("nap")
	e.waitStatus(talk, sIdle, 30*time.Second)
	e.waitFor(approval, 30*time.Second, "waiting for an approval", func(r *dexv1.GetSessionResponse) bool {
		return r.Session.Status == sWaiting && len(stepsBy(r, kindApproval, "")) == 1
	})
	e.waitFor(timer, 30*time.Second, "waiting for a timer", func(r *dexv1.GetSessionResponse) bool {
		return r.Session.Status == sWaiting && len(stepsBy(r, dexv1.StepKind_STEP_KIND_AWAIT_TIMER, "")) == 1
	})
	ids := []string{talk, approval, timer}
	before := map[string]*dexv1.GetSessionResponse{}
	for _, id := range ids {
		before[id] = e.get(id)
	}
	oldID, oldEpoch := clusterIDOf(t, e)

	file := filepath.Join(t.TempDir(), "dex.backup")
	out, ok := dexctlAt(t, e.cluster.GRPCAddrs(), "snapshot", "save", file)
	if !ok || !strings.Contains(out, "saved "+file+": index ") || !strings.Contains(out, "cluster "+oldID) {
		t.Fatalf("snapshot save printed %q", out)
	}
	out, ok = dexctlAt(t, nil, "snapshot", "inspect", file, "--json")
	var in inspected
	if !ok || json.Unmarshal([]byte(out), &in) != nil {
		t.Fatalf("snapshot inspect --json printed %q", out)
	}
	if in.ClusterID != oldID || in.Index == 0 || in.Counts.Sessions["idle"] != 1 || in.Counts.Sessions["waiting"] != 2 ||
		in.Counts.Steps["waiting"] != 2 || in.Counts.TimersPending != 1 || in.Counts.Tools == 0 {
		t.Fatalf("inspect: %+v", in)
	}
	if out, ok := dexctlAt(t, nil, "snapshot", "inspect", file); !ok || !strings.Contains(out, "sessions              3 (idle 1, waiting 2)") ||
		!strings.Contains(out, "backup 2 (its checksum covers the header with the state)") {
		t.Fatalf("snapshot inspect printed %q", out)
	}

	// A damaged copy is refused, by inspect and by restore, before any
	// cluster is asked.
	saved, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	raw := bytes.Clone(saved)
	raw[len(raw)/2] ^= 0xff
	damaged := writeTemp(t, "damaged.backup", raw)
	for _, cmd := range [][]string{{"snapshot", "inspect", damaged}, {"snapshot", "restore", damaged, "--yes"}} {
		if out, ok := dexctlAt(t, e.cluster.GRPCAddrs(), cmd...); ok || !strings.Contains(out, "checksum mismatch") || strings.Count(strings.TrimSpace(out), "\n") != 0 {
			t.Fatalf("dexctl %v on a damaged file printed %q (ok=%v); want one line naming the checksum", cmd, out, ok)
		}
	}

	// The cluster is lost.
	for _, w := range e.workers {
		w.Kill()
	}
	e.cluster.KillAll()
	for _, n := range e.cluster.Nodes {
		if err := os.RemoveAll(n.DataDir); err != nil {
			t.Fatal(err)
		}
	}
	e.conn.Close()

	// A brand-new cluster.
	c2, err := harness.NewCluster(harness.ClusterOptions{BinDir: binDir, Dir: t.TempDir(), Args: fastArgs})
	if err != nil {
		t.Fatal(err)
	}
	e.cluster, e.workers = c2, nil
	if err := c2.Start(); err != nil {
		t.Fatal(err)
	}
	e.waitReady()
	if e.conn, err = client.Dial(c2.Target()); err != nil {
		t.Fatal(err)
	}
	e.client = client.New(e.conn)
	newID, newEpoch := clusterIDOf(t, e)
	if newID == "" || newID == oldID {
		t.Fatalf("the new cluster's id is %q (the old one was %q)", newID, oldID)
	}

	// The old cluster's backup with only the cluster id on its header line
	// changed to claim the new cluster is refused by inspect and restore,
	// naming both clusters: in format 2 its checksum covers the header; in
	// format 1 (whose checksum covers the state alone) the state's own
	// cluster id gives it away.
	tampered := withHeaderCluster(t, saved, oldID, newID)
	tamperedV1 := withHeaderCluster(t, asFormat1(t, saved), oldID, newID)
	for name, data := range map[string][]byte{"tampered.backup": tampered, "tampered-v1.backup": tamperedV1} {
		path := writeTemp(t, name, data)
		for _, cmd := range [][]string{{"snapshot", "inspect", path}, {"snapshot", "restore", path, "--yes"}, {"snapshot", "restore", path, "--yes", "--allow-other-cluster"}} {
			out, ok := dexctlAt(t, c2.GRPCAddrs(), cmd...)
			if ok || !strings.Contains(out, "header says cluster "+newID) || !strings.Contains(out, "taken on cluster "+oldID) || strings.Count(strings.TrimSpace(out), "\n") != 0 {
				t.Fatalf("dexctl %v on %s printed %q (ok=%v); want one line naming both clusters", cmd, name, out, ok)
			}
		}
		// The leader refuses it too when it is sent past dexctl's checks.
		err := restoreRaw(e, data, &dexv1.RestoreSnapshotRequest{ReplaceSessions: true, AllowOtherCluster: true})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "header says cluster "+newID) || !strings.Contains(err.Error(), "taken on cluster "+oldID) {
			t.Fatalf("RestoreSnapshot of %s: %v; want InvalidArgument naming both clusters", name, err)
		}
	}
	if id, epoch := clusterIDOf(t, e); id != newID || epoch != newEpoch {
		t.Fatalf("after refused restores: cluster %s epoch %d; want cluster %s epoch %d as before", id, epoch, newID, newEpoch)
	}
	if list, err := e.client.ListSessions(e.ctx(10 * time.Second)); err != nil || len(list) != 0 {
		t.Fatalf("after refused restores the new cluster holds %d sessions (%v); want none", len(list), err)
	}

	if out, ok := dexctlAt(t, c2.GRPCAddrs(), "snapshot", "restore", file); ok || !strings.Contains(out, "taken on cluster "+oldID+" and this is cluster "+newID) {
		t.Fatalf("restoring another cluster's backup without --allow-other-cluster printed %q (ok=%v)", out, ok)
	}
	out, ok = dexctlAt(t, c2.GRPCAddrs(), "snapshot", "restore", file, "--allow-other-cluster")
	if !ok || !strings.Contains(out, "restored the backup of cluster "+oldID) || !strings.Contains(out, ": 3 sessions;") {
		t.Fatalf("snapshot restore printed %q", out)
	}
	e.waitReady()

	// Every session, Step and wait is back as it was.
	sameAsBefore := func(restore string) {
		t.Helper()
		for _, id := range ids {
			after := e.get(id)
			if !proto.Equal(before[id].Session, after.Session) {
				t.Fatalf("session %s after %s:\n%v\nbefore:\n%v", id, restore, after.Session, before[id].Session)
			}
			if len(after.Steps) != len(before[id].Steps) {
				t.Fatalf("session %s has %d Steps after %s, %d before", id, len(after.Steps), restore, len(before[id].Steps))
			}
			for i := range after.Steps {
				if !proto.Equal(before[id].Steps[i], after.Steps[i]) {
					t.Fatalf("session %s Step %d after %s:\n%v\nbefore:\n%v", id, i, restore, after.Steps[i], before[id].Steps[i])
				}
			}
		}
	}
	sameAsBefore("the restore")
	// The cluster keeps its id; its epoch is above both clusters' epochs.
	id, epoch := clusterIDOf(t, e)
	if id != newID || epoch <= max(oldEpoch, newEpoch, in.Epoch) {
		t.Fatalf("after the restore: cluster %s epoch %d; want cluster %s and an epoch above %d, %d and %d", id, epoch, newID, oldEpoch, newEpoch, in.Epoch)
	}
	// A restore over sessions needs --yes.
	if out, ok := dexctlAt(t, c2.GRPCAddrs(), "snapshot", "restore", file, "--allow-other-cluster"); ok || !strings.Contains(out, "holds 3 sessions") {
		t.Fatalf("restoring over 3 sessions without --yes printed %q (ok=%v)", out, ok)
	}

	// The new cluster's own backup restores there without
	// --allow-other-cluster.
	own := filepath.Join(t.TempDir(), "own.backup")
	if out, ok := dexctlAt(t, c2.GRPCAddrs(), "snapshot", "save", own); !ok || !strings.Contains(out, "cluster "+newID) {
		t.Fatalf("snapshot save on the new cluster printed %q", out)
	}
	if out, ok := dexctlAt(t, c2.GRPCAddrs(), "snapshot", "restore", own, "--yes"); !ok || !strings.Contains(out, "restored the backup of cluster "+newID) || !strings.Contains(out, ": 3 sessions;") {
		t.Fatalf("restoring the cluster's own backup printed %q (ok=%v)", out, ok)
	}
	e.waitReady()
	sameAsBefore("restoring the cluster's own backup")

	// A backup of format 1 (its checksum covers the state alone) still
	// inspects and restores.
	v1 := writeTemp(t, "v1.backup", asFormat1(t, saved))
	if out, ok := dexctlAt(t, nil, "snapshot", "inspect", v1); !ok || !strings.Contains(out, "backup 1 (its checksum covers the state alone)") || !strings.Contains(out, "cluster               "+oldID) {
		t.Fatalf("snapshot inspect of a format 1 backup printed %q (ok=%v)", out, ok)
	}
	if out, ok := dexctlAt(t, c2.GRPCAddrs(), "snapshot", "restore", v1, "--yes", "--allow-other-cluster"); !ok || !strings.Contains(out, "restored the backup of cluster "+oldID) || !strings.Contains(out, ": 3 sessions;") {
		t.Fatalf("restoring a format 1 backup printed %q (ok=%v)", out, ok)
	}
	e.waitReady()
	sameAsBefore("restoring a format 1 backup")
	if id, _ := clusterIDOf(t, e); id != newID {
		t.Fatalf("after the restores the cluster is %s, want %s", id, newID)
	}

	// The demo goes on in the new cluster.
	e.startWorker(backupScript)
	ap := stepsBy(before[approval], kindApproval, "")[0]
	if err := e.client.ResolveApproval(e.ctx(20*time.Second), ap.Id, true, ""); err != nil {
		t.Fatalf("approve after the restore: %v", err)
	}
	lastText := func(r *dexv1.GetSessionResponse) string {
		h := r.Session.History
		if len(h) == 0 {
			return ""
		}
		return h[len(h)-1].Text
	}
	e.waitFor(approval, 60*time.Second, `"deployed"`, func(r *dexv1.GetSessionResponse) bool {
		return r.Session.Status == sIdle && lastText(r) == "deployed"
	})
	if _, err := e.client.SendMessage(e.ctx(20*time.Second), talk, "again", ""); err != nil {
		t.Fatal(err)
	}
	e.waitFor(talk, 60*time.Second, `"hello again"`, func(r *dexv1.GetSessionResponse) bool {
		return r.Session.Status == sIdle && lastText(r) == "hello again"
	})
	e.waitFor(timer, 90*time.Second, `"woke up"`, func(r *dexv1.GetSessionResponse) bool {
		return r.Session.Status == sIdle && lastText(r) == "woke up"
	})
	if n := harness.Executions(e.ledgerEntries(), approval, func(l harness.LedgerEntry) bool { return l.Tool == "deploy" }); n != 1 {
		t.Fatalf("deploy ran %d times; want once", n)
	}
}
