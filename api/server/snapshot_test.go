package server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/wirerules"
	"github.com/dexhq/dex/cluster"
	"github.com/dexhq/dex/cluster/backup"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// restoreTarget starts a one-node cluster holding one session and returns
// it with its cluster id and an AdminService client.
func restoreTarget(t *testing.T) (*cluster.Node, string, dexv1.AdminServiceClient) {
	t.Helper()
	node, _, conn := serveSingleNode(t, Options{})
	for deadline := time.Now().Add(10 * time.Second); node.ClusterID() == ""; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the cluster never got an id")
		}
	}
	res, err := node.Propose(context.Background(), &fsmpb.Command{NowMs: time.Now().UnixMilli(), Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{SessionId: "here-1"}}})
	if err != nil || res.Err != nil {
		t.Fatalf("create a session: %v %v", err, res.Err)
	}
	return node, node.ClusterID(), dexv1.NewAdminServiceClient(conn)
}

// backupOf writes a backup of a state of cluster stateCluster ("": a state
// with no cluster id) holding sessions, whose header names headerCluster and
// whose checksum matches.
func backupOf(t *testing.T, headerCluster, stateCluster string, sessions ...string) []byte {
	t.Helper()
	return sectionOf(t, 0, 0, headerCluster, stateCluster, sessions...)
}

// sectionOf is backupOf as the backup of partition k of a cluster of n
// partitions (n 0: of a cluster of one, whose header names none).
func sectionOf(t *testing.T, k, n int, headerCluster, stateCluster string, sessions ...string) []byte {
	t.Helper()
	f := fsm.New(fsm.Options{})
	var cmds []*fsmpb.Command
	if stateCluster != "" {
		cmds = append(cmds, &fsmpb.Command{Body: &fsmpb.Command_SetClusterId{SetClusterId: &fsmpb.SetClusterId{ClusterId: stateCluster}}})
	}
	for _, s := range sessions {
		cmds = append(cmds, &fsmpb.Command{NowMs: 1000, Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{SessionId: s}}})
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
	h := backup.Header{Index: uint64(len(cmds)), Term: 1, ClusterID: headerCluster, StateVersion: 3, Size: int64(payload.Len()), Partition: k, Partitions: n}
	if _, err := backup.Write(&out, h, &payload); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// sendRestore streams raw to RestoreSnapshot with the flags of req.
func sendRestore(t *testing.T, admin dexv1.AdminServiceClient, raw []byte, req *dexv1.RestoreSnapshotRequest) (*dexv1.RestoreSnapshotResponse, error) {
	t.Helper()
	return restoreTo(t, admin, 0, raw, req)
}

// restoreTo is sendRestore to partition k.
func restoreTo(t *testing.T, admin dexv1.AdminServiceClient, k int, raw []byte, req *dexv1.RestoreSnapshotRequest) (*dexv1.RestoreSnapshotResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stream, err := admin.RestoreSnapshot(client.ToPartition(ctx, k))
	if err != nil {
		return nil, err
	}
	for len(raw) > 0 {
		n := min(len(raw), 64<<10)
		req.Data = raw[:n]
		if err := stream.Send(req); err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		raw, req = raw[n:], &dexv1.RestoreSnapshotRequest{}
	}
	return stream.CloseAndRecv()
}

// wantStatus checks err's code and that its message mentions every one of
// want.
func wantStatus(t *testing.T, err error, code codes.Code, want ...string) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("got %v, want %v", err, code)
	}
	for _, w := range want {
		if !strings.Contains(status.Convert(err).Message(), w) {
			t.Fatalf("%q does not mention %q", status.Convert(err).Message(), w)
		}
	}
}

// A backup whose state is another cluster's is refused, naming both
// clusters, when its header claims this cluster: edited alone (the
// checksum no longer matches) or with its checksum made again; even with
// every flag, and nothing changes.
func TestRestoreSnapshot_AHeaderClaimingThisClusterOverAnotherClustersStateIsRefused(t *testing.T) {
	node, here, admin := restoreTarget(t)
	before := stateDigest(node)
	genuine := backupOf(t, "other", "other", "s1")
	edited := bytes.Replace(genuine, []byte(`"cluster_id":"other"`), []byte(`"cluster_id":"`+here+`"`), 1)
	remade := backupOf(t, here, "other", "s1")
	all := &dexv1.RestoreSnapshotRequest{ReplaceSessions: true, AllowOtherCluster: true}

	_, err := sendRestore(t, admin, edited, all)
	wantStatus(t, err, codes.InvalidArgument, "checksum mismatch", "its header says cluster "+here+", its state was taken on cluster other")
	_, err = sendRestore(t, admin, remade, all)
	wantStatus(t, err, codes.InvalidArgument, "its header says cluster "+here+" but its state was taken on cluster other")
	if after := stateDigest(node); after != before || node.ClusterID() != here {
		t.Fatalf("a refused restore changed the state:\n%s\nbefore:\n%s", after, before)
	}
}

// Another cluster's genuine backup is refused naming both clusters unless
// another cluster's backup is allowed; then it restores and this cluster
// keeps its id.
func TestRestoreSnapshot_AnotherClustersBackupNeedsAllowOtherCluster(t *testing.T) {
	node, here, admin := restoreTarget(t)
	before := stateDigest(node)
	raw := backupOf(t, "other", "other", "s1", "s2")

	_, err := sendRestore(t, admin, raw, &dexv1.RestoreSnapshotRequest{ReplaceSessions: true})
	wantStatus(t, err, codes.FailedPrecondition, "the backup was taken on cluster other and this is cluster "+here)
	_, err = sendRestore(t, admin, backupOf(t, "", "", "s1"), &dexv1.RestoreSnapshotRequest{ReplaceSessions: true})
	wantStatus(t, err, codes.FailedPrecondition, "the backup was taken on cluster (none) and this is cluster "+here)
	if stateDigest(node) != before {
		t.Fatal("a refused restore changed the state")
	}
	resp, err := sendRestore(t, admin, raw, &dexv1.RestoreSnapshotRequest{ReplaceSessions: true, AllowOtherCluster: true})
	if err != nil {
		t.Fatal(err)
	}
	if resp.BackupClusterId != "other" || resp.Sessions != 2 || node.ClusterID() != here || len(node.State().Sessions()) != 2 {
		t.Fatalf("restored %v; the cluster is %s with %d sessions", resp, node.ClusterID(), len(node.State().Sessions()))
	}
}

// A backup saved from this cluster names it in its header (from the state's
// own meta record) and restores here without allowing another cluster's.
func TestRestoreSnapshot_ThisClustersOwnBackupRestores(t *testing.T) {
	node, here, admin := restoreTarget(t)
	raw, v := saveFrom(t, admin, 0)
	if v.ClusterID != here || v.Version != backup.FormatVersion {
		t.Fatalf("saved a backup of cluster %q, format %d; want %q, %d", v.ClusterID, v.Version, here, backup.FormatVersion)
	}
	if bytes.Contains(raw[:bytes.IndexByte(raw, '}')], []byte("partition")) {
		t.Fatalf("the header of a cluster of one partition names partitions: %.200q", raw)
	}
	resp, err := sendRestore(t, admin, raw, &dexv1.RestoreSnapshotRequest{ReplaceSessions: true})
	if err != nil {
		t.Fatal(err)
	}
	if resp.BackupClusterId != here || resp.Sessions != 1 || len(node.State().Sessions()) != 1 {
		t.Fatalf("restored %v", resp)
	}
}

// A backup's header names the cluster its state records; a snapshot that
// does not open with a meta record makes no backup.
func TestBackupHeader_NamesTheStatesClusterAndRefusesAStateWithoutOne(t *testing.T) {
	f := fsm.New(fsm.Options{})
	data, err := fsm.Encode(&fsmpb.Command{Body: &fsmpb.Command_SetClusterId{SetClusterId: &fsmpb.SetClusterId{ClusterId: "aaaa"}}})
	if err != nil {
		t.Fatal(err)
	}
	if res := f.ApplyEntry(1, data); res.Err != nil {
		t.Fatal(res.Err)
	}
	var payload bytes.Buffer
	if err := f.Snapshot().Persist(&payload); err != nil {
		t.Fatal(err)
	}
	snapOf := func(b []byte) (*cluster.SavedSnapshot, *bufio.Reader) {
		s := &cluster.SavedSnapshot{Index: 7, Term: 2, Size: int64(len(b)), ReadCloser: io.NopCloser(bytes.NewReader(b))}
		return s, bufio.NewReaderSize(s, 4096)
	}
	snap, br := snapOf(payload.Bytes())
	h, err := backupHeader(snap, br, time.UnixMilli(5))
	if err != nil {
		t.Fatal(err)
	}
	if want := (backup.Header{Index: 7, Term: 2, ClusterID: "aaaa", StateVersion: 3, Size: int64(payload.Len()), TakenAtMs: 5}); h != want {
		t.Fatalf("header %+v, want %+v", h, want)
	}
	if rest, _ := io.ReadAll(br); !bytes.Equal(rest, payload.Bytes()) {
		t.Fatal("making the header consumed the state")
	}
	for _, bad := range []string{"", "DEXSNAP\x03", "DEXSNAP\x03\xff\xff"} {
		snap, br := snapOf([]byte(bad))
		if _, err := backupHeader(snap, br, time.Now()); err == nil || !strings.Contains(err.Error(), "the snapshot taken does not decode") {
			t.Fatalf("state %q: %v", bad, err)
		}
	}
}

// saveFrom saves partition k's backup and opens it.
func saveFrom(t *testing.T, admin dexv1.AdminServiceClient, k int) ([]byte, *backup.Verified) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := admin.SaveSnapshot(client.ToPartition(ctx, k), &dexv1.SaveSnapshotRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := client.ReceiveBackup(stream, &buf); err != nil {
		t.Fatalf("save partition %d: %v", k, err)
	}
	raw := buf.Bytes()
	v, err := backup.Open(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		t.Fatalf("partition %d's backup: %v", k, err)
	}
	return raw, v
}

// servePartitions starts a one-node cluster of n partitions behind a
// Router and returns it, its cluster id and an AdminService client.
func servePartitions(t *testing.T, n int) (*cluster.Host, string, dexv1.AdminServiceClient) {
	t.Helper()
	host, conn := servePartitionsConn(t, n)
	return host, host.Partition(0).ClusterID(), dexv1.NewAdminServiceClient(conn)
}

// servePartitionsConn is servePartitions with a connection to the Router.
func servePartitionsConn(t *testing.T, n int) (*cluster.Host, *grpc.ClientConn) {
	t.Helper()
	cfg := singleNodeConfig(t)
	cfg.Partitions = n
	lis, err := net.Listen("tcp", cfg.GRPCAddr)
	if err != nil {
		t.Fatal(err)
	}
	host, err := cluster.NewHost(cfg)
	if err == nil {
		err = host.Start(func(int) cluster.Hooks { return cluster.Hooks{} })
	}
	if err != nil {
		lis.Close()
		t.Fatal(err)
	}
	router := NewRouter(host.Nodes(), zap.NewNop(), make([]Options, n))
	go router.Serve(lis)
	t.Cleanup(func() {
		router.Stop(time.Second)
		_ = host.Shutdown()
	})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if ok, _ := router.Ready(); ok && host.Partition(0).ClusterID() != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the partitions never became ready")
		}
	}
	conn, err := grpc.NewClient(cfg.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return host, conn
}

// createInPartition creates a session in partition k of host, with an id
// of that partition, and returns the id.
func createInPartition(t *testing.T, host *cluster.Host, k int, prefix string) string {
	t.Helper()
	id := prefix
	for i := 0; wirerules.PartitionOf(id, host.Partitions()) != k; i++ {
		id = fmt.Sprintf("%s-%d", prefix, i)
	}
	res, err := host.Partition(k).Propose(context.Background(), &fsmpb.Command{NowMs: time.Now().UnixMilli(), Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{SessionId: id}}})
	if err != nil || res.Err != nil {
		t.Fatalf("create %s in partition %d: %v %v", id, k, err, res.Err)
	}
	return id
}

// sessionIDs lists the sessions a node's state holds.
func sessionIDs(n *cluster.Node) string {
	var ids []string
	for _, s := range n.State().Sessions() {
		ids = append(ids, s.Id)
	}
	return strings.Join(ids, ",")
}

// In a cluster of three partitions a partition's backup names its
// partition, their number and the cluster; it restores into its own
// partition, which holds no cluster id of its own to compare, without
// allowing another cluster's backup; it is refused by any other partition,
// and nothing changes there.
func TestRestoreSnapshot_APartitionTakesItsOwnBackupAndNoOther(t *testing.T) {
	host, here, admin := servePartitions(t, 3)
	kept := createInPartition(t, host, 1, "kept")
	createInPartition(t, host, 2, "other")
	raw0, v0 := saveFrom(t, admin, 0)
	raw1, v1 := saveFrom(t, admin, 1)
	if v0.Partition != 0 || v0.Partitions != 3 || v0.ClusterID != here {
		t.Fatalf("partition 0's backup: %+v", v0.Header)
	}
	if v1.Partition != 1 || v1.Partitions != 3 || v1.ClusterID != here {
		t.Fatalf("partition 1's backup: %+v; want partition 1 of 3 of cluster %s", v1.Header, here)
	}
	later := createInPartition(t, host, 1, "later")
	before1, before2 := stateDigest(host.Partition(1)), stateDigest(host.Partition(2))
	all := &dexv1.RestoreSnapshotRequest{ReplaceSessions: true, AllowOtherCluster: true}

	_, err := restoreTo(t, admin, 2, raw1, all)
	wantStatus(t, err, codes.InvalidArgument, "the backup is partition 1's and this is partition 2")
	_, err = restoreTo(t, admin, 1, raw0, all)
	wantStatus(t, err, codes.InvalidArgument, "the backup is partition 0's and this is partition 1")
	_, err = restoreTo(t, admin, 1, raw1, &dexv1.RestoreSnapshotRequest{})
	wantStatus(t, err, codes.FailedPrecondition, "partition 1 of this cluster holds 2 sessions")
	if stateDigest(host.Partition(1)) != before1 || stateDigest(host.Partition(2)) != before2 {
		t.Fatal("a refused restore changed a partition")
	}

	resp, err := restoreTo(t, admin, 1, raw1, &dexv1.RestoreSnapshotRequest{ReplaceSessions: true})
	if err != nil {
		t.Fatal(err)
	}
	if resp.BackupClusterId != here || resp.Sessions != 1 || sessionIDs(host.Partition(1)) != kept {
		t.Fatalf("restored %v: partition 1 holds %q, want %q (not %s)", resp, sessionIDs(host.Partition(1)), kept, later)
	}
	if stateDigest(host.Partition(2)) != before2 || host.Partition(0).ClusterID() != here {
		t.Fatal("restoring partition 1 changed another")
	}
}

// Another cluster's backup of a partition is refused, naming both
// clusters, unless another cluster's backup is allowed; partition 0 still
// compares its state's cluster id, not the header's.
func TestRestoreSnapshot_APartitionsBackupOfAnotherClusterNeedsAllowOtherCluster(t *testing.T) {
	host, here, admin := servePartitions(t, 3)
	foreign := sectionOf(t, 1, 3, "other", "", "s1")
	_, err := restoreTo(t, admin, 1, foreign, &dexv1.RestoreSnapshotRequest{ReplaceSessions: true})
	wantStatus(t, err, codes.FailedPrecondition, "the backup was taken on cluster other and this is cluster "+here)
	claimed := sectionOf(t, 0, 3, here, "other", "s1")
	_, err = restoreTo(t, admin, 0, claimed, &dexv1.RestoreSnapshotRequest{ReplaceSessions: true, AllowOtherCluster: true})
	wantStatus(t, err, codes.InvalidArgument, "its header says cluster "+here+" but its state was taken on cluster other")
	if sessionIDs(host.Partition(0)) != "" || sessionIDs(host.Partition(1)) != "" {
		t.Fatal("a refused restore changed the state")
	}
	resp, err := restoreTo(t, admin, 1, foreign, &dexv1.RestoreSnapshotRequest{ReplaceSessions: true, AllowOtherCluster: true})
	if err != nil {
		t.Fatal(err)
	}
	if resp.BackupClusterId != "other" || sessionIDs(host.Partition(1)) != "s1" || host.Partition(1).ClusterID() != here {
		t.Fatalf("restored %v", resp)
	}
}

// A restore needs the same number of partitions: a backup of a cluster of
// one partition is refused by a cluster of three, and a partition's backup
// of a cluster of three by a cluster of one.
func TestRestoreSnapshot_ABackupOfAnotherNumberOfPartitionsIsRefused(t *testing.T) {
	host, here, admin := servePartitions(t, 3)
	before := stateDigest(host.Partition(0))
	_, err := sendRestore(t, admin, backupOf(t, here, here, "s1"), &dexv1.RestoreSnapshotRequest{ReplaceSessions: true})
	wantStatus(t, err, codes.FailedPrecondition, "the backup was taken on a cluster of 1 partition and this cluster has 3: a restore needs the same number of partitions")
	if stateDigest(host.Partition(0)) != before {
		t.Fatal("a refused restore changed the state")
	}

	node, one, single := restoreTarget(t)
	before = stateDigest(node)
	_, err = sendRestore(t, single, sectionOf(t, 0, 3, one, one, "s1"), &dexv1.RestoreSnapshotRequest{ReplaceSessions: true})
	wantStatus(t, err, codes.FailedPrecondition, "the backup was taken on a cluster of 3 partitions and this cluster has 1")
	if stateDigest(node) != before {
		t.Fatal("a refused restore changed the state")
	}
}
