package server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
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
	h := backup.Header{Index: uint64(len(cmds)), Term: 1, ClusterID: headerCluster, StateVersion: 3, Size: int64(payload.Len())}
	if _, err := backup.Write(&out, h, &payload); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// sendRestore streams raw to RestoreSnapshot with the flags of req.
func sendRestore(t *testing.T, admin dexv1.AdminServiceClient, raw []byte, req *dexv1.RestoreSnapshotRequest) (*dexv1.RestoreSnapshotResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stream, err := admin.RestoreSnapshot(ctx)
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
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := admin.SaveSnapshot(ctx, &dexv1.SaveSnapshotRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var raw []byte
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		raw = append(raw, chunk.Data...)
	}
	v, err := backup.Open(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		t.Fatal(err)
	}
	if v.ClusterID != here || v.Version != backup.FormatVersion {
		t.Fatalf("saved a backup of cluster %q, format %d; want %q, %d", v.ClusterID, v.Version, here, backup.FormatVersion)
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
