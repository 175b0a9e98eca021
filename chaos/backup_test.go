package chaos

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

const backupScript = `{"turns": [
 {"match": "hello", "outputs": [{"text": "hi there"}]},
 {"match": "again", "outputs": [{"text": "hello again"}]},
 {"match": "deploy", "outputs": [
   {"tool_calls": [{"tool": "deploy", "arguments": {"env": "prod"}}]},
   {"text": "deployed"}]},
 {"match": "nap", "outputs": [
   {"tool_calls": [{"tool": "sleep", "arguments": {"seconds": 30}}]},
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
	admin := dexv1.NewAdminServiceClient(e.conn)
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
	if out, ok := dexctlAt(t, nil, "snapshot", "inspect", file); !ok || !strings.Contains(out, "sessions              3 (idle 1, waiting 2)") {
		t.Fatalf("snapshot inspect printed %q", out)
	}

	// A damaged copy is refused, by inspect and by restore, before any
	// cluster is asked.
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	damaged := filepath.Join(t.TempDir(), "damaged.backup")
	raw[len(raw)/2] ^= 0xff
	if err := os.WriteFile(damaged, raw, 0o644); err != nil {
		t.Fatal(err)
	}
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
	c2, err := NewCluster(ClusterOptions{BinDir: binDir, Dir: t.TempDir(), Args: fastArgs})
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

	if out, ok := dexctlAt(t, c2.GRPCAddrs(), "snapshot", "restore", file); ok || !strings.Contains(out, "taken on cluster "+oldID+" and this is cluster "+newID) {
		t.Fatalf("restoring another cluster's backup without --allow-other-cluster printed %q (ok=%v)", out, ok)
	}
	out, ok = dexctlAt(t, c2.GRPCAddrs(), "snapshot", "restore", file, "--allow-other-cluster")
	if !ok || !strings.Contains(out, "restored the backup of cluster "+oldID) || !strings.Contains(out, ": 3 sessions;") {
		t.Fatalf("snapshot restore printed %q", out)
	}
	e.waitReady()

	// Every session, Step and wait is back as it was.
	for _, id := range ids {
		after := e.get(id)
		if !proto.Equal(before[id].Session, after.Session) {
			t.Fatalf("session %s after the restore:\n%v\nbefore:\n%v", id, after.Session, before[id].Session)
		}
		if len(after.Steps) != len(before[id].Steps) {
			t.Fatalf("session %s has %d Steps after the restore, %d before", id, len(after.Steps), len(before[id].Steps))
		}
		for i := range after.Steps {
			if !proto.Equal(before[id].Steps[i], after.Steps[i]) {
				t.Fatalf("session %s Step %d after the restore:\n%v\nbefore:\n%v", id, i, after.Steps[i], before[id].Steps[i])
			}
		}
	}
	// The cluster keeps its id; its epoch is above both clusters' epochs.
	id, epoch := clusterIDOf(t, e)
	if id != newID || epoch <= max(oldEpoch, newEpoch, in.Epoch) {
		t.Fatalf("after the restore: cluster %s epoch %d; want cluster %s and an epoch above %d, %d and %d", id, epoch, newID, oldEpoch, newEpoch, in.Epoch)
	}
	// A restore over sessions needs --yes.
	if out, ok := dexctlAt(t, c2.GRPCAddrs(), "snapshot", "restore", file, "--allow-other-cluster"); ok || !strings.Contains(out, "holds 3 sessions") {
		t.Fatalf("restoring over 3 sessions without --yes printed %q (ok=%v)", out, ok)
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
	if n := Executions(e.ledgerEntries(), approval, func(l LedgerEntry) bool { return l.Tool == "deploy" }); n != 1 {
		t.Fatalf("deploy ran %d times; want once", n)
	}
}
