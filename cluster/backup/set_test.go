package backup

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// section writes partition k's backup of a cluster of n, named cluster
// clusterID in its header, of the state snapshot payload.
func section(t *testing.T, k, n int, clusterID string, payload []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	h := Header{Index: uint64(40 + k), Term: 3, ClusterID: clusterID, StateVersion: 3, Size: int64(len(payload)), TakenAtMs: 5, Partition: k, Partitions: n}
	if _, err := Write(&out, h, bytes.NewReader(payload)); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// sections are the backups of the three partitions of cluster "aaaa":
// partition 0's state records the cluster, the others' none.
func sections(t *testing.T) [][]byte {
	t.Helper()
	return [][]byte{
		section(t, 0, 3, "aaaa", persisted(t, stateOf(t, "aaaa"))),
		section(t, 1, 3, "aaaa", persisted(t, stateOf(t, ""))),
		section(t, 2, 3, "aaaa", persisted(t, stateOf(t, ""))),
	}
}

// assemble writes a file of format 3 whose header says n partitions, of
// the backups secs as they are, with a checksum that matches.
func assemble(n int, secs ...[]byte) []byte {
	var out bytes.Buffer
	fmt.Fprintf(&out, "DEXBACKUP 3\n{\"partitions\":%d}\n", n)
	for _, s := range secs {
		out.Write(s)
	}
	sum := sha256.Sum256(out.Bytes())
	fmt.Fprintf(&out, "SHA256 %s\n", hex.EncodeToString(sum[:]))
	return out.Bytes()
}

func openSetBytes(raw []byte) (*Set, error) {
	return OpenSet(bytes.NewReader(raw), int64(len(raw)))
}

// The backup of a cluster of one partition is what it always was, byte
// for byte: no partition in its header, and OpenSet reads it as the one
// partition of its cluster.
func TestTheBackupOfOnePartitionIsFormat2ByteForByte(t *testing.T) {
	payload := persisted(t, sampleState(t))
	got := backupAs(t, "aaaa", payload)
	head := fmt.Sprintf(`{"index":42,"term":3,"cluster_id":"aaaa","state_version":3,"size":%d,"taken_at_ms":5}`, len(payload))
	body := append([]byte("DEXBACKUP 2\n"+head+"\n"), payload...)
	sum := sha256.Sum256(body)
	want := append(body, "SHA256 "+hex.EncodeToString(sum[:])+"\n"...)
	if !bytes.Equal(got, want) {
		t.Fatalf("the backup of one partition changed:\n%.200q\nwant\n%.200q", got, want)
	}
	set, err := openSetBytes(got)
	if err != nil {
		t.Fatal(err)
	}
	if set.Version != 2 || set.Partitions() != 1 || set.ClusterID() != "aaaa" || set.Checksum != hex.EncodeToString(sum[:]) {
		t.Fatalf("opened as %+v", set)
	}
	if raw, _ := io.ReadAll(set.Sections[0].Raw); !bytes.Equal(raw, got) {
		t.Fatal("the one backup's Raw is not the file")
	}
	// A format 1 file is a cluster of one partition too.
	if set, err := openSetBytes(backupFormat1(t, "aaaa", payload)); err != nil || set.Version != 1 || set.Partitions() != 1 {
		t.Fatalf("format 1: %+v, %v", set, err)
	}
}

// The backup of a cluster of three partitions holds each partition's
// backup, in order, each sent on as it was received.
func TestSetRoundTripAndInspect(t *testing.T) {
	secs := sections(t)
	var out bytes.Buffer
	sum, err := WriteSet(&out, 3, func(k int, w io.Writer) error {
		_, err := w.Write(secs[k])
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	raw := out.Bytes()
	if !bytes.HasPrefix(raw, []byte("DEXBACKUP 3\n{\"partitions\":3}\n")) || !bytes.Equal(raw, assemble(3, secs...)) {
		t.Fatalf("wrote %.80q", raw)
	}
	set, err := openSetBytes(raw)
	if err != nil {
		t.Fatal(err)
	}
	if set.Version != FormatPartitions || set.Partitions() != 3 || set.ClusterID() != "aaaa" || set.Checksum != sum {
		t.Fatalf("opened as %+v", set)
	}
	for k, v := range set.Sections {
		got, _ := io.ReadAll(v.Raw)
		if v.Partition != k || v.Partitions != 3 || v.Index != uint64(40+k) || v.ClusterID != "aaaa" || !bytes.Equal(got, secs[k]) {
			t.Fatalf("partition %d: %+v", k, v.Header)
		}
	}
	summary, err := InspectSet(set)
	if err != nil {
		t.Fatal(err)
	}
	if summary.Partitions != 3 || summary.FormatVersion != 3 || len(summary.Sections) != 3 || summary.Sections[2].Partition != 2 ||
		summary.Sections[0].Counts.Nodes != 1 || summary.Sections[1].Counts.Sessions["running"]+summary.Sections[1].Counts.Sessions["idle"] != 2 {
		t.Fatalf("summary %+v", summary)
	}
	// Open reads one backup, and says what this file is.
	if _, err := openBytes(raw); err == nil || !strings.Contains(err.Error(), "holds a backup of each of the 3 partitions of a cluster (backup format 3)") {
		t.Fatalf("Open of a file of 3 partitions: %v", err)
	}
	if _, err := WriteSet(&bytes.Buffer{}, 1, nil); err == nil {
		t.Fatal("a set of one partition was written")
	}
}

// A file whose number of partitions is not that of the backups it holds
// is refused, and so is one partition's backup alone.
func TestSetOfAnotherCountIsRefused(t *testing.T) {
	secs := sections(t)
	cases := map[string]struct {
		raw  []byte
		want string
	}{
		"a partition missing":      {assemble(3, secs[0], secs[1]), "partition 2's backup: no header"},
		"a partition too many":     {assemble(2, secs...), "the backup in partition 0's place of 2 is partition 0's of 3"},
		"one partition said":       {assemble(1, secs[0]), "its header says 1 partitions (backup format 3 holds 2 or more)"},
		"bytes after the last one": {assemble(3, secs[0], secs[1], secs[2], []byte("x")), "1 bytes follow the backup of the last partition, 2"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := openSetBytes(tc.raw)
			wantRefused(t, err, tc.want)
		})
	}
	_, err := openSetBytes(secs[1])
	if err == nil || !strings.Contains(err.Error(), "the file is the backup of partition 1 alone, of a cluster of 3 partitions") {
		t.Fatalf("one partition's backup alone: %v", err)
	}
}

// Each backup must stand in its own partition's place: one out of order,
// one relabelled or of another cluster is refused.
func TestSetWithABackupOfAnotherPartitionIsRefused(t *testing.T) {
	secs := sections(t)
	relabelled := section(t, 1, 3, "aaaa", persisted(t, stateOf(t, "aaaa")))
	beyond := section(t, 3, 3, "aaaa", persisted(t, stateOf(t, "")))
	foreign := section(t, 2, 3, "bbbb", persisted(t, stateOf(t, "")))
	cases := map[string]struct {
		raw  []byte
		want string
	}{
		"out of order":     {assemble(3, secs[0], secs[2], secs[1]), "the backup in partition 1's place of 3 is partition 2's of 3"},
		"partition 0 as 1": {assemble(3, secs[0], relabelled, secs[2]), "partition 1's backup: not a Dex backup, or a damaged one: its header says partition 1 but its state records cluster aaaa, as only partition 0's does"},
		"out of range":     {assemble(3, secs[0], secs[1], beyond), "its header names partition 3 of 3"},
		"another cluster":  {assemble(3, secs[0], secs[1], foreign), "partition 2's backup was taken on cluster bbbb, partition 0's on cluster aaaa"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := openSetBytes(tc.raw)
			wantRefused(t, err, tc.want)
		})
	}
}

// A file altered, cut short or grown fails its checksum; a partition's
// backup altered under a checksum made again fails its own.
func TestDamagedSetIsRefused(t *testing.T) {
	secs := sections(t)
	raw := assemble(3, secs...)
	flipped := bytes.Clone(raw)
	flipped[len(flipped)/2] ^= 0x01
	inner := bytes.Clone(secs[1])
	inner[len(inner)/2] ^= 0x01
	cases := map[string]struct {
		raw  []byte
		want string
	}{
		"a byte flipped":       {flipped, "checksum mismatch: the file hashes to"},
		"cut short":            {raw[:len(raw)-100], "checksum"},
		"cut in the header":    {raw[:20], "no header"},
		"bytes appended":       {append(bytes.Clone(raw), 'x'), "no checksum at the end"},
		"a partition altered":  {assemble(3, secs[0], inner, secs[2]), "partition 1's backup: not a Dex backup, or a damaged one: checksum mismatch"},
		"another header field": {bytes.Replace(raw, []byte(`{"partitions":3}`), []byte(`{"partitions":3,"x":1}`), 1), "header: json: unknown field"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := openSetBytes(tc.raw)
			wantRefused(t, err, tc.want)
		})
	}
}

func TestWriteSetFileAtomicLeavesNoFileOnFailure(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "b.dexbackup")
	secs := sections(t)
	lost := errors.New("partition 2's leader is gone")
	_, err := WriteSetFileAtomic(path, func(w io.Writer) error {
		_, err := WriteSet(w, 3, func(k int, w io.Writer) error {
			if k == 2 {
				return lost
			}
			_, err := w.Write(secs[k])
			return err
		})
		return err
	})
	if !errors.Is(err, lost) {
		t.Fatalf("WriteSetFileAtomic = %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("left behind: %v", entries)
	}
	set, err := WriteSetFileAtomic(path, func(w io.Writer) error { _, err := w.Write(assemble(3, secs...)); return err })
	if err != nil || set.Partitions() != 3 {
		t.Fatalf("WriteSetFileAtomic = %+v, %v", set, err)
	}
	f, err := OpenSetFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Partitions() != 3 || f.Sections[1].Partition != 1 {
		t.Fatalf("reopened as %+v", f.Set)
	}
	if _, err := OpenFile(path); err == nil {
		t.Fatal("OpenFile, which reads one backup, opened a file of three")
	}
}
