//go:build e2e

package soak

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/server"
	"github.com/dexhq/dex/cluster/backup"
)

// soakerOn is a soaker around e's cluster as the end of a soak has it.
func soakerOn(e *env) *soaker {
	return &soaker{
		o:   Options{BinDir: binDir, MaxPayload: server.DefaultMaxPayload, Progress: io.Discard},
		dir: e.dir, cluster: e.cluster, conn: e.conn, cl: e.client, admin: dexv1.NewAdminServiceClient(e.conn),
	}
}

// The checks after the soak pass a good backup and a good restart, and
// fail a backup that does not restore and a node whose snapshot does not.
func TestRecoveryChecksFailWhatCannotBeRestored(t *testing.T) {
	e := newEnv(t)
	ids := []string{e.createSession("hello"), e.createSession("again")}
	s := soakerOn(e)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s.takeBackup(ctx, time.Now())
	if b := s.backups[0]; b.Err != "" || b.Index == 0 {
		t.Fatalf("backup: %+v", b)
	}
	s.backups = append(s.backups,
		BackupCheck{File: damagedCopy(t, s.backups[0].File, flipByte)},
		BackupCheck{File: damagedCopy(t, s.backups[0].File, cutState)})
	checks := s.checkBackups(ctx)
	if checks[0].Err != "" || checks[0].Sessions != 2 {
		t.Fatalf("the good backup: %+v", checks[0])
	}
	for _, b := range checks[1:] {
		if b.Stage != BackupInspect {
			t.Fatalf("a damaged backup passed: %+v", b)
		}
	}
	if got := kinds(CheckRecovery(CheckInput{Restart: &RestartCheck{}, Backups: checks}).Violations); !slices.Equal(got, []string{VBackup, VBackup}) {
		t.Fatalf("violations %v, want two %s", got, VBackup)
	}

	in := CheckInput{Final: map[string]*dexv1.GetSessionResponse{}}
	for _, id := range ids {
		in.Final[id] = e.get(id)
	}
	idx, err := s.appliedIndexes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	in.DigestIndex = slices.Min(idx)
	rc := s.restartCheck(ctx, in, nil)
	snapped := -1 // the node that took the backup's snapshot
	for i, n := range rc.Nodes {
		if n.Err != "" || n.Index < in.DigestIndex {
			t.Fatalf("a good restart failed: %+v", n)
		}
		if len(n.Snapshots) > 0 {
			snapped = i
		}
	}
	if rc.Served != "" || rc.Sessions != 2 || snapped < 0 {
		t.Fatalf("a good restart: %+v", rc)
	}

	// A restarted cluster that lost a history entry is caught.
	kept := in.Final[ids[0]]
	lost := proto.Clone(kept).(*dexv1.GetSessionResponse)
	lost.Session.History = append(lost.Session.History, &dexv1.HistoryEntry{Seq: 99, Text: "never written"})
	in.Final[ids[0]] = lost
	if rc := s.restartCheck(ctx, in, nil); !strings.Contains(rc.Served, ids[0]+": history entry 99 is missing") {
		t.Fatalf("a lost history entry passed: %+v", rc)
	}
	in.Final[ids[0]] = kept

	// The node's only snapshot is damaged: it cannot start.
	node := e.cluster.Nodes[snapped]
	damageSnapshot(t, node.DataDir, rc.Nodes[snapped].Snapshots[0].ID)
	rc = s.restartCheck(ctx, in, nil)
	if n := rc.Nodes[snapped]; n.Snapshots[0].Err == "" || n.Err == "" {
		t.Fatalf("a damaged snapshot passed: %+v", n)
	}
	// (The followers took no snapshot of their own: that is said too.)
	got := kinds(CheckRecovery(CheckInput{Restart: rc, Backups: checks[:1]}).Violations)
	if n := len(slices.DeleteFunc(slices.Clone(got), func(k string) bool { return k != VRestart })); n != 2 {
		t.Fatalf("violations %v, want two %s (the snapshot, the node)", got, VRestart)
	}
}

// damagedCopy writes a copy of the backup at path, changed by damage.
func damagedCopy(t *testing.T, path string, damage func(t *testing.T, raw []byte) []byte) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "damaged.dex")
	if err := os.WriteFile(out, damage(t, raw), 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// flipByte alters a byte of the state: the checksum no longer matches.
func flipByte(_ *testing.T, raw []byte) []byte {
	raw[len(raw)/2] ^= 0xff
	return raw
}

// cutState keeps the first half of the state under a checksum that
// matches it: the file verifies, its state does not restore.
func cutState(t *testing.T, raw []byte) []byte {
	v, err := backup.Open(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		t.Fatal(err)
	}
	h := v.Header
	h.Size /= 2
	var out bytes.Buffer
	if _, err := backup.Write(&out, h, v.Payload); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// damageSnapshot alters the state of snapshot id in a stopped node's data
// dir.
func damageSnapshot(t *testing.T, dataDir, id string) {
	t.Helper()
	path := filepath.Join(dataDir, "raft", "snapshots", id, "state.bin")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)/2] ^= 0xff
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}
