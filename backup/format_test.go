package backup

import (
	"bytes"
	"errors"
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

// sampleState is a state with two sessions, a node, an epoch and a cluster id.
func sampleState(t *testing.T) *fsm.FSM {
	f := fsm.New(fsm.Options{})
	apply(t, f,
		&fsmpb.Command{Body: &fsmpb.Command_SetClusterId{SetClusterId: &fsmpb.SetClusterId{ClusterId: "aaaa"}}},
		&fsmpb.Command{Body: &fsmpb.Command_BumpEpoch{BumpEpoch: &fsmpb.BumpEpoch{NodeId: "n1"}}},
		&fsmpb.Command{Body: &fsmpb.Command_SetNode{SetNode: &fsmpb.SetNode{Node: &fsmpb.NodeInfo{Id: "n1", RaftAddress: "old:1", GrpcAddress: "old:2"}}}},
		&fsmpb.Command{NowMs: 1000, Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{SessionId: "s1", MessageId: "m1", Message: "hello"}}},
		&fsmpb.Command{NowMs: 1000, Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{SessionId: "s2"}}},
	)
	return f
}

// sampleBackup writes a backup of sampleState.
func sampleBackup(t *testing.T) []byte {
	f := sampleState(t)
	var payload bytes.Buffer
	if err := f.Snapshot().Persist(&payload); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	h := Header{Index: 42, Term: 3, ClusterID: "aaaa", StateVersion: 2, Size: int64(payload.Len()), TakenAtMs: 5}
	if _, err := Write(&out, h, &payload); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func TestRoundTripAndInspect(t *testing.T) {
	raw := sampleBackup(t)
	v, err := Open(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		t.Fatal(err)
	}
	if v.Index != 42 || v.Term != 3 || v.ClusterID != "aaaa" || len(v.Checksum) != 64 {
		t.Fatalf("header = %+v", v)
	}
	sum, err := Inspect(v)
	if err != nil {
		t.Fatal(err)
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
	wrongVersion := bytes.Replace(bytes.Clone(raw), []byte("DEXBACKUP 1\n"), []byte("DEXBACKUP 9\n"), 1)
	forged := bytes.Replace(bytes.Clone(raw), []byte(`"index":42`), []byte(`"index":43`), 1)
	cases := map[string]struct {
		data []byte
		want string
	}{
		"checksum mismatch": {flipped, "checksum mismatch"},
		"truncated":         {raw[:len(raw)-10], "cut short"},
		"cut in the header": {raw[:15], "no header"},
		"bytes appended":    {append(bytes.Clone(raw), 'x'), "cut short or has bytes added"},
		"not a backup":      {[]byte("DEXSNAP\x02 something else\n"), "not a Dex backup"},
		"empty":             {nil, "not a Dex backup"},
		"header edited":     {forged, ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			v, err := Open(bytes.NewReader(tc.data), int64(len(tc.data)))
			if name == "header edited" {
				// The checksum covers the state, not the header: an edited
				// index still decodes, and is shown as written.
				if err != nil || v.Index != 43 {
					t.Fatalf("got %v, %v", v, err)
				}
				return
			}
			if err == nil {
				t.Fatal("a damaged backup was accepted")
			}
			if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want ErrDamaged mentioning %q", err, tc.want)
			}
		})
	}
	_, err := Open(bytes.NewReader(wrongVersion), int64(len(wrongVersion)))
	if err == nil || !strings.Contains(err.Error(), "backup format version 9: this build reads version 1") {
		t.Fatalf("wrong version: %v", err)
	}
}

func TestStateThatDoesNotDecodeIsRefusedByInspect(t *testing.T) {
	payload := []byte("DEXSNAP\x02\xff\xff\xff")
	var out bytes.Buffer
	if _, err := Write(&out, Header{Size: int64(len(payload))}, bytes.NewReader(payload)); err != nil {
		t.Fatal(err)
	}
	v, err := Open(bytes.NewReader(out.Bytes()), int64(out.Len()))
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
