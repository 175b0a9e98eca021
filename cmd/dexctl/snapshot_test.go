package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/cluster/backup"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// fakeBackups is the AdminService of a cluster of len(sections)
// partitions: SaveSnapshot of partition k (the call's dex-partition
// metadata) sends sections[k]; RestoreSnapshot records what partition k
// received, and fails for partition failAt.
type fakeBackups struct {
	dexv1.UnimplementedAdminServiceServer
	sections [][]byte
	failAt   int

	mu       sync.Mutex
	named    []string       // the dex-partition metadata of each call
	restored map[int][]byte // partition → the backup it received
}

func newFakeBackups(sections [][]byte) *fakeBackups {
	return &fakeBackups{sections: sections, failAt: -1, restored: map[int][]byte{}}
}

func (f *fakeBackups) Status(context.Context, *dexv1.StatusRequest) (*dexv1.StatusResponse, error) {
	st := threeNodes("n1", "leader", "follower", "follower")
	for k := range f.sections {
		st.Partitions = append(st.Partitions, &dexv1.PartitionStatus{Id: uint32(k), Leader: "n1"})
	}
	return st, nil
}

// partition is the partition a call names, recorded.
func (f *fakeBackups) partition(ctx context.Context) int {
	md, _ := metadata.FromIncomingContext(ctx)
	v := md.Get(client.PartitionMetadataKey)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.named = append(f.named, strings.Join(v, ","))
	k := 0
	if len(v) > 0 {
		k = int(v[0][0] - '0')
	}
	return k
}

func (f *fakeBackups) SaveSnapshot(_ *dexv1.SaveSnapshotRequest, stream dexv1.AdminService_SaveSnapshotServer) error {
	raw := f.sections[f.partition(stream.Context())]
	half := len(raw) / 2
	for _, chunk := range [][]byte{raw[:half], raw[half:]} {
		if err := stream.Send(&dexv1.SnapshotChunk{Data: chunk}); err != nil {
			return err
		}
	}
	return nil
}

func (f *fakeBackups) RestoreSnapshot(stream dexv1.AdminService_RestoreSnapshotServer) error {
	k := f.partition(stream.Context())
	var got []byte
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		got = append(got, req.Data...)
	}
	if k == f.failAt {
		return status.Error(codes.FailedPrecondition, "the leader stepped down")
	}
	f.mu.Lock()
	f.restored[k] = got
	f.mu.Unlock()
	return stream.SendAndClose(&dexv1.RestoreSnapshotResponse{BackupIndex: uint64(40 + k), BackupClusterId: "aaaa", Sessions: 1, Epoch: 5})
}

// restoredPartitions is how many partitions received a backup.
func (f *fakeBackups) restoredPartitions() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.restored)
}

// startBackupFake serves f and s on a free loopback port.
func startBackupFake(t *testing.T, f *fakeBackups, s *fakeSessions) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	dexv1.RegisterAdminServiceServer(srv, f)
	dexv1.RegisterSessionServiceServer(srv, s)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// partitionBackup is partition k's backup of a cluster of n partitions
// (n 1: the backup of a cluster of one, as it always was) of cluster
// "aaaa", holding one session.
func partitionBackup(t *testing.T, k, n int) []byte {
	t.Helper()
	f := fsm.New(fsm.Options{})
	cmds := []*fsmpb.Command{{NowMs: 1000, Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{SessionId: "s" + string(rune('0'+k))}}}}
	if k == 0 {
		cmds = append([]*fsmpb.Command{{Body: &fsmpb.Command_SetClusterId{SetClusterId: &fsmpb.SetClusterId{ClusterId: "aaaa"}}}}, cmds...)
	}
	for i, c := range cmds {
		data, err := fsm.Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		if res := f.ApplyEntry(uint64(i+1), data); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	var payload, out bytes.Buffer
	if err := f.Snapshot().Persist(&payload); err != nil {
		t.Fatal(err)
	}
	h := backup.Header{Index: uint64(40 + k), Term: 2, ClusterID: "aaaa", StateVersion: 3, Size: int64(payload.Len()), TakenAtMs: 5}
	if n > 1 {
		h.Partition, h.Partitions = k, n
	}
	if _, err := backup.Write(&out, h, &payload); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// clusterBackups are the backups of each partition of a cluster of n.
func clusterBackups(t *testing.T, n int) [][]byte {
	var out [][]byte
	for k := range n {
		out = append(out, partitionBackup(t, k, n))
	}
	return out
}

// saveSet writes the backup file of a cluster of len(secs) partitions.
func saveSet(t *testing.T, secs [][]byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "dex.backup")
	if len(secs) == 1 {
		if err := os.WriteFile(path, secs[0], 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	if _, err := backup.WriteSetFileAtomic(path, func(w io.Writer) error {
		_, err := backup.WriteSet(w, len(secs), func(k int, w io.Writer) error { _, err := w.Write(secs[k]); return err })
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return path
}

// save saves a backup of each partition of a cluster of three into one
// file, naming each partition in its call, and inspect shows each.
func TestSnapshotSaveWritesEveryPartitionsBackupIntoOneFile(t *testing.T) {
	secs := clusterBackups(t, 3)
	f := newFakeBackups(secs)
	addr := startBackupFake(t, f, &fakeSessions{})
	path := filepath.Join(t.TempDir(), "dex.backup")
	out, err := run(t, "--addr", addr, "snapshot", "save", path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "saved "+path+": 3 partitions of cluster aaaa, sha256 ") || !strings.Contains(out, "  partition 2: index 42, term 2, ") {
		t.Fatalf("save printed %q", out)
	}
	if got := strings.Join(f.named, ","); got != ",1,2" {
		t.Fatalf("the saves named partitions %q, want none, 1, 2", got)
	}
	set, err := backup.OpenSetFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	if set.Version != backup.FormatPartitions || set.Partitions() != 3 {
		t.Fatalf("saved %+v", set.Set)
	}
	for k, v := range set.Sections {
		if raw, _ := io.ReadAll(v.Raw); !bytes.Equal(raw, secs[k]) {
			t.Fatalf("partition %d's backup is not the one its partition sent", k)
		}
	}

	out, err = run(t, "snapshot", "inspect", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"partitions  3\n", "format      backup 3 (its checksum covers the whole file, every partition's backup in it)", "\npartition 0\n  cluster ", "\npartition 2\n", "  index                 42\n", "  sessions              1 (idle 1)\n"} {
		if !strings.Contains(out, want) {
			t.Fatalf("inspect printed\n%s\nwithout %q", out, want)
		}
	}
	out, err = run(t, "snapshot", "inspect", path, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var sum struct {
		Partitions int `json:"partitions"`
		Sections   []struct {
			Partition int    `json:"partition"`
			Index     uint64 `json:"index"`
			ClusterID string `json:"cluster_id"`
		} `json:"sections"`
	}
	if err := json.Unmarshal([]byte(out), &sum); err != nil || sum.Partitions != 3 || len(sum.Sections) != 3 || sum.Sections[1].Partition != 1 || sum.Sections[1].Index != 41 || sum.Sections[1].ClusterID != "aaaa" {
		t.Fatalf("inspect --json printed %s (%v)", out, err)
	}
}

// The backup of a cluster of one partition is saved as the cluster sends
// it, byte for byte, by a call that names no partition.
func TestSnapshotSaveOfOnePartitionIsTheBackupAsSent(t *testing.T) {
	secs := clusterBackups(t, 1)
	f := newFakeBackups(secs)
	addr := startBackupFake(t, f, &fakeSessions{})
	path := filepath.Join(t.TempDir(), "dex.backup")
	out, err := run(t, "--addr", addr, "snapshot", "save", path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "saved "+path+": index 40, term 2, cluster aaaa, ") {
		t.Fatalf("save printed %q", out)
	}
	if raw, _ := os.ReadFile(path); !bytes.Equal(raw, secs[0]) || len(f.named) != 1 || f.named[0] != "" {
		t.Fatalf("saved another file than the backup sent (calls naming %q)", f.named)
	}
	out, err = run(t, "snapshot", "inspect", path)
	if err != nil || !strings.Contains(out, "format                backup 2 (its checksum covers the header with the state), state 3\n") || strings.Contains(out, "partition") {
		t.Fatalf("inspect printed %q (%v)", out, err)
	}
}

// restore sends each partition its own backup, partition 0 first.
func TestSnapshotRestoreSendsEachPartitionItsOwnBackup(t *testing.T) {
	secs := clusterBackups(t, 3)
	f := newFakeBackups(secs)
	addr := startBackupFake(t, f, &fakeSessions{})
	out, err := run(t, "--addr", addr, "snapshot", "restore", saveSet(t, secs))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "restored the backup of cluster aaaa, every one of its 3 partitions: 3 sessions\n") || !strings.Contains(out, "  partition 2: index 42, 1 session; its leader runs epoch 5\n") {
		t.Fatalf("restore printed %q", out)
	}
	for k := range 3 {
		if !bytes.Equal(f.restored[k], secs[k]) {
			t.Fatalf("partition %d received %d bytes, not its own backup", k, len(f.restored[k]))
		}
	}
}

// A backup of another number of partitions than the cluster's is refused
// before any partition is asked to restore it.
func TestSnapshotRestoreRefusesAnotherNumberOfPartitions(t *testing.T) {
	for _, tc := range []struct {
		file, cluster int
		want          string
	}{
		{3, 1, "is the backup of a cluster of 3 partitions and this cluster has 1 partition: a restore needs the same number of partitions; nothing was restored"},
		{1, 3, "is the backup of a cluster of 1 partition and this cluster has 3 partitions: a restore needs the same number of partitions; nothing was restored"},
		{2, 3, "is the backup of a cluster of 2 partitions and this cluster has 3 partitions"},
	} {
		f := newFakeBackups(clusterBackups(t, tc.cluster))
		addr := startBackupFake(t, f, &fakeSessions{})
		_, err := run(t, "--addr", addr, "snapshot", "restore", saveSet(t, clusterBackups(t, tc.file)), "--yes")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("a backup of %d partitions into a cluster of %d: %v", tc.file, tc.cluster, err)
		}
		if f.restoredPartitions() != 0 {
			t.Fatalf("a refused restore restored %d partitions", f.restoredPartitions())
		}
	}
}

// Without --yes a cluster that holds sessions is refused before any
// partition is restored: one partition's refusal does not come after
// another was replaced.
func TestSnapshotRestoreWithoutYesRefusesBeforeAnyPartition(t *testing.T) {
	secs := clusterBackups(t, 3)
	f := newFakeBackups(secs)
	held := &fakeSessions{pageSize: 10, all: []*dexv1.SessionSummary{{Id: "here"}}}
	addr := startBackupFake(t, f, held)
	_, err := run(t, "--addr", addr, "snapshot", "restore", saveSet(t, secs))
	if err == nil || !strings.Contains(err.Error(), "this cluster holds sessions and a restore replaces the whole state: confirm to replace them (--yes); nothing was restored") {
		t.Fatalf("restore without --yes: %v", err)
	}
	if f.restoredPartitions() != 0 {
		t.Fatalf("a refused restore restored %d partitions", f.restoredPartitions())
	}
	// An empty cluster needs no --yes.
	held.all = nil
	if _, err := run(t, "--addr", addr, "snapshot", "restore", saveSet(t, secs)); err != nil || f.restoredPartitions() != 3 {
		t.Fatalf("restore into an empty cluster: %v, %d partitions", err, f.restoredPartitions())
	}
}

// A restore that fails at one partition says which partitions were
// restored and which were not; run again, it restores every partition.
func TestSnapshotRestoreFailingPartWayNamesWhatWasRestored(t *testing.T) {
	secs := clusterBackups(t, 3)
	f := newFakeBackups(secs)
	f.failAt = 1
	addr := startBackupFake(t, f, &fakeSessions{})
	path := saveSet(t, secs)
	_, err := run(t, "--addr", addr, "snapshot", "restore", path, "--yes")
	want := "partition 1: the leader stepped down; partition 0 was restored from the backup, partitions 1 and 2 were not: run the restore again (with --yes), which restores every partition again"
	if err == nil || err.Error() != want {
		t.Fatalf("a restore failing at partition 1: %v\nwant %s", err, want)
	}
	if f.restoredPartitions() != 1 || f.restored[0] == nil {
		t.Fatalf("restored %d partitions, want partition 0 alone", f.restoredPartitions())
	}
	f.failAt = 0
	f.restored = map[int][]byte{}
	if _, err := run(t, "--addr", addr, "snapshot", "restore", path, "--yes"); err == nil || err.Error() != "partition 0: the leader stepped down; nothing was restored" {
		t.Fatalf("a restore failing at partition 0: %v", err)
	}
	f.failAt = -1
	if _, err := run(t, "--addr", addr, "snapshot", "restore", path, "--yes"); err != nil || f.restoredPartitions() != 3 {
		t.Fatalf("the restore run again: %v, %d partitions", err, f.restoredPartitions())
	}
}

// A damaged file is refused by inspect and restore before any cluster is
// asked.
func TestSnapshotDamagedBackupOfPartitionsIsRefused(t *testing.T) {
	secs := clusterBackups(t, 3)
	f := newFakeBackups(secs)
	addr := startBackupFake(t, f, &fakeSessions{})
	path := saveSet(t, secs)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)/2] ^= 0xff
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"snapshot", "inspect", path}, {"--addr", addr, "snapshot", "restore", path, "--yes"}} {
		if _, err := run(t, args...); err == nil || !strings.Contains(err.Error(), "checksum mismatch: the file hashes to") {
			t.Fatalf("%v: %v", args, err)
		}
	}
	if len(f.named) != 0 {
		t.Fatalf("a damaged file reached the cluster: %q", f.named)
	}
}
