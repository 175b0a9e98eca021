package logstore

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

func openBolt(t *testing.T, path string) *raftboltdb.BoltStore {
	t.Helper()
	s, err := raftboltdb.NewBoltStore(path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func checked(t *testing.T, s *raftboltdb.BoltStore, path string) *CheckedLogStore {
	t.Helper()
	c, err := NewCheckedLogStore(s, s, path, false)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func entry(i uint64, data string) *raft.Log {
	return &raft.Log{Index: i, Term: 3, Type: raft.LogCommand, Data: []byte(data), AppendedAt: time.Unix(1700000000, 123456789)}
}

// replaceInFile edits a stopped store's bytes in place (same length).
func replaceInFile(t *testing.T, path, old, new string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Count(raw, []byte(old)) != 1 {
		t.Fatalf("%q occurs %d times in %s", old, bytes.Count(raw, []byte(old)), path)
	}
	if err := os.WriteFile(path, bytes.Replace(raw, []byte(old), []byte(new), 1), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestCheckedLog_RoundTripStripsTheChecksum(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raft.db")
	s := openBolt(t, path)
	defer s.Close()
	c := checked(t, s, path)
	in := []*raft.Log{
		entry(1, "first"),
		{Index: 2, Term: 3, Type: raft.LogConfiguration, Data: []byte("conf")}, // zero AppendedAt
		{Index: 3, Term: 4, Type: raft.LogCommand, Data: []byte("third"), Extensions: []byte("middleware")},
		{Index: 4, Term: 4, Type: raft.LogNoop},
	}
	if err := c.StoreLogs(in); err != nil {
		t.Fatal(err)
	}
	if in[0].Extensions != nil || string(in[2].Extensions) != "middleware" {
		t.Fatal("StoreLogs changed the entries raft passed it")
	}
	for _, want := range in {
		var got raft.Log
		if err := c.GetLog(want.Index, &got); err != nil {
			t.Fatalf("entry %d: %v", want.Index, err)
		}
		if got.Index != want.Index || got.Term != want.Term || got.Type != want.Type ||
			!bytes.Equal(got.Data, want.Data) || !bytes.Equal(got.Extensions, want.Extensions) ||
			!got.AppendedAt.Equal(want.AppendedAt) {
			t.Fatalf("entry %d read back as %+v, want %+v", want.Index, got, *want)
		}
	}
	// The bare store holds the envelope: the checksum is on disk.
	var bare raft.Log
	if err := s.GetLog(1, &bare); err != nil || !bytes.HasPrefix(bare.Extensions, []byte("DX\x01")) {
		t.Fatalf("stored extensions %q, %v", bare.Extensions, err)
	}
	if n, err := c.VerifyLog(); n != 4 || err != nil {
		t.Fatalf("VerifyLog = %d, %v", n, err)
	}
	var missing raft.Log
	called := false
	c.OnDamage = func(error) { called = true }
	if err := c.GetLog(99, &missing); !errors.Is(err, raft.ErrLogNotFound) || called {
		t.Fatalf("a missing entry: %v (OnDamage called: %v), want raft's ErrLogNotFound only", err, called)
	}
}

func TestCheckedLog_EntriesWrittenBeforeChecksumsStillRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raft.db")
	s := openBolt(t, path)
	defer s.Close()
	if err := s.StoreLogs([]*raft.Log{entry(1, "old-1"), entry(2, "old-2")}); err != nil {
		t.Fatal(err)
	}
	c := checked(t, s, path)
	if c.ChecksumsFrom() != 3 {
		t.Fatalf("checksums from %d, want 3", c.ChecksumsFrom())
	}
	if err := c.StoreLogs([]*raft.Log{entry(3, "new-3")}); err != nil {
		t.Fatal(err)
	}
	// The first index is recorded once: a restart keeps it.
	c = checked(t, s, path)
	if c.ChecksumsFrom() != 3 {
		t.Fatalf("after a restart checksums from %d, want 3", c.ChecksumsFrom())
	}
	var l raft.Log
	if err := c.GetLog(1, &l); err != nil || string(l.Data) != "old-1" {
		t.Fatalf("old entry: %q, %v", l.Data, err)
	}
	if n, err := c.VerifyLog(); n != 3 || err != nil {
		t.Fatalf("VerifyLog = %d, %v", n, err)
	}
	// An entry at or after the first checksummed index without a checksum
	// is damage (its envelope was lost), not an old entry.
	if err := s.StoreLogs([]*raft.Log{entry(4, "bare-4")}); err != nil {
		t.Fatal(err)
	}
	err := c.GetLog(4, &l)
	var de *DamageError
	if !errors.As(err, &de) || de.Index != 4 || !strings.Contains(err.Error(), "no checksum") {
		t.Fatalf("bare entry 4: %v", err)
	}
}

func TestCheckedLog_AnEditedByteIsDetectedWithItsIndexAndFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raft.db")
	s := openBolt(t, path)
	c := checked(t, s, path)
	if err := c.StoreLogs([]*raft.Log{entry(1, "a"), entry(2, "marker-AAAA-0001"), entry(3, "c")}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	replaceInFile(t, path, "marker-AAAA-0001", "marker-ZZZZ-0001")

	s = openBolt(t, path)
	defer s.Close()
	c = checked(t, s, path)
	var damage error
	c.OnDamage = func(err error) { damage = err }
	var l raft.Log
	err := c.GetLog(2, &l)
	var de *DamageError
	if !errors.As(err, &de) || de.Index != 2 || de.Path != path || damage != err {
		t.Fatalf("GetLog(2) = %v (OnDamage got %v), want a damage error for entry 2", err, damage)
	}
	if msg := err.Error(); !strings.Contains(msg, "raft log entry 2 in "+path) || !strings.Contains(msg, "restore this node from its peers") {
		t.Fatalf("message %q", msg)
	}
	if err := c.GetLog(3, &l); err != nil {
		t.Fatalf("an intact entry: %v", err)
	}
	if n, err := c.VerifyLog(); n != 1 || !errors.As(err, &de) || de.Index != 2 {
		t.Fatalf("VerifyLog = %d, %v", n, err)
	}
}

func TestCheckedLog_ADamagedEnvelopeIsDetected(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raft.db")
	s := openBolt(t, path)
	defer s.Close()
	c := checked(t, s, path)
	for _, ext := range [][]byte{[]byte("XX\x01abcd"), []byte("DX\x09abcd"), []byte("DX")} {
		if err := s.StoreLogs([]*raft.Log{{Index: 1, Term: 1, Data: []byte("x"), Extensions: ext}}); err != nil {
			t.Fatal(err)
		}
		var l raft.Log
		var de *DamageError
		if err := c.GetLog(1, &l); !errors.As(err, &de) || de.Index != 1 {
			t.Fatalf("extensions %q: %v", ext, err)
		}
	}
}

// VerifyLog reads the log in two halves at once; what it reports is still
// what a read from the first entry on meets first.
func TestCheckedLog_VerifyLogReportsTheFirstDamageInEitherHalf(t *testing.T) {
	for _, c := range []struct {
		name    string
		damaged []uint64
		want    uint64 // the damaged index reported
		read    int    // entries read before it
	}{
		{"lower half", []uint64{3}, 3, 2},
		{"upper half", []uint64{7}, 7, 6},
		{"both halves", []uint64{3, 7}, 3, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "raft.db")
			s := openBolt(t, path)
			cl := checked(t, s, path)
			var entries []*raft.Log // in one write, so that bolt holds each once
			for i := uint64(1); i <= 8; i++ {
				entries = append(entries, entry(i, fmt.Sprintf("marker-AAAA-%04d", i)))
			}
			if err := cl.StoreLogs(entries); err != nil {
				t.Fatal(err)
			}
			s.Close()
			for _, i := range c.damaged {
				replaceInFile(t, path, fmt.Sprintf("marker-AAAA-%04d", i), fmt.Sprintf("marker-ZZZZ-%04d", i))
			}
			s = openBolt(t, path)
			defer s.Close()
			n, err := checked(t, s, path).VerifyLog()
			var de *DamageError
			if !errors.As(err, &de) || de.Index != c.want || n != c.read {
				t.Fatalf("VerifyLog = %d, %v; want %d read, then damage at entry %d", n, err, c.read, c.want)
			}
		})
	}
}
