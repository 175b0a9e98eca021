package backup

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// apply commits commands to f as consecutive log entries.
func apply(t *testing.T, f *fsm.FSM, cmds ...*fsmpb.Command) {
	t.Helper()
	for _, c := range cmds {
		data, err := fsm.Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		if res := f.ApplyEntry(f.State().Meta().AppliedIndex+1, data); res.Err != nil {
			t.Fatalf("apply %v: %v", c, res.Err)
		}
	}
}

// sampleState is a state with two sessions, a node, an epoch and the
// cluster id "aaaa".
func sampleState(t *testing.T) *fsm.FSM {
	return stateOf(t, "aaaa")
}

// stateOf is sampleState of cluster clusterID ("": a state with no cluster
// id yet).
func stateOf(t *testing.T, clusterID string) *fsm.FSM {
	f := fsm.New(fsm.Options{})
	if clusterID != "" {
		apply(t, f, &fsmpb.Command{Body: &fsmpb.Command_SetClusterId{SetClusterId: &fsmpb.SetClusterId{ClusterId: clusterID}}})
	}
	apply(t, f,
		&fsmpb.Command{Body: &fsmpb.Command_BumpEpoch{BumpEpoch: &fsmpb.BumpEpoch{NodeId: "n1"}}},
		&fsmpb.Command{Body: &fsmpb.Command_SetNode{SetNode: &fsmpb.SetNode{Node: &fsmpb.NodeInfo{Id: "n1", RaftAddress: "old:1", GrpcAddress: "old:2"}}}},
		&fsmpb.Command{NowMs: 1000, Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{SessionId: "s1", MessageId: "m1", Message: "hello"}}},
		&fsmpb.Command{NowMs: 1000, Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{SessionId: "s2"}}},
	)
	return f
}

// persisted is the state snapshot of f.
func persisted(t *testing.T, f *fsm.FSM) []byte {
	t.Helper()
	var payload bytes.Buffer
	if err := f.Snapshot().Persist(&payload); err != nil {
		t.Fatal(err)
	}
	return payload.Bytes()
}

// sampleBackup writes a backup of sampleState.
func sampleBackup(t *testing.T) []byte {
	return backupAs(t, "aaaa", persisted(t, sampleState(t)))
}

// backupAs writes a backup of the state snapshot payload whose header names
// cluster clusterID, with a checksum that matches.
func backupAs(t *testing.T, clusterID string, payload []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	h := Header{Index: 42, Term: 3, ClusterID: clusterID, StateVersion: 3, Size: int64(len(payload)), TakenAtMs: 5}
	if _, err := Write(&out, h, bytes.NewReader(payload)); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// backupFormat1 writes a backup the way format 1 did: the same lines, the
// checksum of the state snapshot alone.
func backupFormat1(t *testing.T, clusterID string, payload []byte) []byte {
	t.Helper()
	head, err := json.Marshal(Header{Index: 42, Term: 3, ClusterID: clusterID, StateVersion: 3, Size: int64(len(payload)), TakenAtMs: 5})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(payload)
	var out bytes.Buffer
	fmt.Fprintf(&out, "DEXBACKUP 1\n%s\n%sSHA256 %s\n", head, payload, hex.EncodeToString(sum[:]))
	return out.Bytes()
}

// openBytes opens the backup in raw.
func openBytes(raw []byte) (*Verified, error) {
	return Open(bytes.NewReader(raw), int64(len(raw)))
}

// wantRefused checks that err is ErrDamaged and mentions every one of want.
func wantRefused(t *testing.T, err error, want ...string) {
	t.Helper()
	if !errors.Is(err, ErrDamaged) {
		t.Fatalf("error %v, want ErrDamaged", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("error %q does not mention %q", err, w)
		}
	}
}

func TestRoundTripAndInspect(t *testing.T) {
	raw := sampleBackup(t)
	v, err := Open(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		t.Fatal(err)
	}
	if v.Index != 42 || v.Term != 3 || v.ClusterID != "aaaa" || v.Version != 2 || len(v.Checksum) != 64 {
		t.Fatalf("header = %+v", v)
	}
	sum, err := Inspect(v)
	if err != nil {
		t.Fatal(err)
	}
	if sum.FormatVersion != 2 {
		t.Fatalf("summary format version %d, want 2", sum.FormatVersion)
	}
	c := sum.Counts
	if c.Sessions["running"]+c.Sessions["idle"] != 2 || c.Nodes != 1 || sum.Epoch != 1 {
		t.Fatalf("summary = %+v", sum)
	}
	if c.Sessions["running"] != 1 || c.Steps["queued"] != 1 || c.History != 1 {
		t.Fatalf("s1 should be running its first RunModel: %+v", c)
	}
}

func TestDamagedFilesAreRefused(t *testing.T) {
	raw := sampleBackup(t)
	flipped := bytes.Clone(raw)
	flipped[len(flipped)/2] ^= 0x01
	wrongVersion := bytes.Replace(bytes.Clone(raw), []byte("DEXBACKUP 2\n"), []byte("DEXBACKUP 9\n"), 1)
	forged := bytes.Replace(bytes.Clone(raw), []byte(`"index":42`), []byte(`"index":43`), 1)
	downgraded := bytes.Replace(bytes.Clone(raw), []byte("DEXBACKUP 2\n"), []byte("DEXBACKUP 1\n"), 1)
	cases := map[string]struct {
		data []byte
		want string
	}{
		"checksum mismatch": {flipped, "checksum mismatch: the header with the state hashes to"},
		"truncated":         {raw[:len(raw)-10], "cut short"},
		"cut in the header": {raw[:15], "no header"},
		"bytes appended":    {append(bytes.Clone(raw), 'x'), "cut short or has bytes added"},
		"not a backup":      {[]byte("DEXSNAP\x02 something else\n"), "not a Dex backup"},
		"empty":             {nil, "not a Dex backup"},
		"header edited":     {forged, "checksum mismatch: the header with the state hashes to"},
		// Told it is format 1, the file's checksum (of the header with the
		// state) is no checksum of the state alone.
		"version line edited": {downgraded, "(backup format 1; the file was altered)"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Open(bytes.NewReader(tc.data), int64(len(tc.data)))
			if err == nil {
				t.Fatal("a damaged backup was accepted")
			}
			if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want ErrDamaged mentioning %q", err, tc.want)
			}
		})
	}
	_, err := Open(bytes.NewReader(wrongVersion), int64(len(wrongVersion)))
	if err == nil || !strings.Contains(err.Error(), "backup format version 9: this build reads versions 1 to 3") {
		t.Fatalf("wrong version: %v", err)
	}
}

// Another cluster's backup whose header was edited to name this cluster is
// refused, and the error names both clusters.
func TestAHeaderEditedToAnotherClusterIsRefusedNamingBoth(t *testing.T) {
	raw := sampleBackup(t)
	tampered := bytes.Replace(raw, []byte(`"cluster_id":"aaaa"`), []byte(`"cluster_id":"bbbb"`), 1)
	if bytes.Equal(tampered, raw) {
		t.Fatal("the header has no cluster id to edit")
	}
	_, err := openBytes(tampered)
	wantRefused(t, err, "checksum mismatch", "(backup format 2; the file was altered; its header says cluster bbbb, its state was taken on cluster aaaa)")
}

// A header naming another cluster than its state's is refused even when the
// checksum was made again to match it, in either format.
func TestAHeaderThatIsNotTheStatesClusterIsRefused(t *testing.T) {
	payload := persisted(t, sampleState(t))
	_, err := openBytes(backupAs(t, "bbbb", payload))
	wantRefused(t, err, "its header says cluster bbbb but its state was taken on cluster aaaa (backup format 2; the header was altered)")
	_, err = openBytes(backupFormat1(t, "bbbb", payload))
	wantRefused(t, err, "its header says cluster bbbb but its state was taken on cluster aaaa (backup format 1; the header was altered)")
	_, err = openBytes(backupAs(t, "bbbb", persisted(t, stateOf(t, ""))))
	wantRefused(t, err, "its header says cluster bbbb but its state was taken on cluster (none)")
}

// A backup of format 1, whose checksum covers the state alone, still opens,
// inspects and restores.
func TestFormat1StillOpens(t *testing.T) {
	payload := persisted(t, sampleState(t))
	raw := backupFormat1(t, "aaaa", payload)
	v, err := openBytes(raw)
	if err != nil {
		t.Fatal(err)
	}
	stateSum := sha256.Sum256(payload)
	if v.Version != 1 || v.ClusterID != "aaaa" || v.Checksum != hex.EncodeToString(stateSum[:]) {
		t.Fatalf("format 1 backup opened as %+v", v)
	}
	sum, err := Inspect(v)
	if err != nil {
		t.Fatal(err)
	}
	if sum.FormatVersion != 1 || sum.Counts.Nodes != 1 || sum.Epoch != 1 {
		t.Fatalf("summary = %+v", sum)
	}
	if _, err := Load(v); err != nil {
		t.Fatal(err)
	}

	flipped := bytes.Clone(raw)
	flipped[len(flipped)-100] ^= 0x01
	_, err = openBytes(flipped)
	wantRefused(t, err, "checksum mismatch: the state alone hashes to", "(backup format 1; the file was altered)")
}

// A backup whose state has no meta record to read is refused by Open, and a
// checksum mismatch over such a state names no cluster.
func TestAStateThatDoesNotDecodeIsRefused(t *testing.T) {
	_, err := openBytes(backupAs(t, "", []byte("DEXSNAP\x02\xff\xff\xff")))
	wantRefused(t, err, "the state inside does not decode")

	// A checksum mismatch over a state whose meta does not decode names
	// no cluster.
	raw := backupAs(t, "", []byte("DEXSNAP\x02\xff\xff\xff"))
	raw[len(raw)-2] ^= 0x01
	_, err = openBytes(raw)
	wantRefused(t, err, "checksum mismatch")
	if strings.Contains(err.Error(), "its header says") {
		t.Fatalf("error %q names a cluster of a state it could not read", err)
	}
}

func TestStateThatDoesNotDecodeIsRefusedByInspect(t *testing.T) {
	payload := append(persisted(t, sampleState(t)), 0xff, 0xff, 0xff)
	v, err := openBytes(backupAs(t, "aaaa", payload))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Inspect(v); !errors.Is(err, ErrDamaged) {
		t.Fatalf("Inspect = %v, want ErrDamaged", err)
	}
}

func TestWriteRefusesAShortPayload(t *testing.T) {
	if _, err := Write(&bytes.Buffer{}, Header{Size: 10}, strings.NewReader("short")); err == nil {
		t.Fatal("a payload shorter than its header says was written")
	}
}

func TestWriteFileAtomicLeavesNoFileOnFailure(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "b.dexbackup")
	raw := sampleBackup(t)
	if _, err := WriteFileAtomic(path, func(w io.Writer) error { _, err := w.Write(raw[:len(raw)-1]); return err }); err == nil {
		t.Fatal("a truncated stream was saved")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("left behind: %v", entries)
	}
	v, err := WriteFileAtomic(path, func(w io.Writer) error { _, err := w.Write(raw); return err })
	if err != nil || v.Index != 42 {
		t.Fatalf("WriteFileAtomic = %v, %v", v, err)
	}
	f, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
}
