package logstore

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// boltFile makes a raft.db with some entries and returns its path.
func boltFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "raft.db")
	s := openBolt(t, path)
	c := checked(t, s, path)
	for i := uint64(1); i <= 200; i++ {
		if err := c.StoreLog(entry(i, strings.Repeat(fmt.Sprintf("entry-%d ", i), 20))); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func damage(t *testing.T, path string, f func(raw []byte) []byte) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, f(raw), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestCheckBoltFile_AcceptsAnIntactStoreAndAMissingOne(t *testing.T) {
	path := boltFile(t)
	if _, err := CheckBoltFile(path); err != nil {
		t.Fatal(err)
	}
	if _, err := CheckBoltFile(filepath.Join(t.TempDir(), "raft.db")); err != nil {
		t.Fatalf("a missing store: %v", err)
	}
}

func TestCheckBoltFile_RefusesTruncatedZeroedAndFlippedMetaPages(t *testing.T) {
	// bbolt grows the file ahead of its pages: cut into the last page in use.
	m, err := CheckBoltFile(boltFile(t))
	if err != nil {
		t.Fatal(err)
	}
	inUse := int(m.Pages) * int(m.PageSize)
	cases := map[string]func([]byte) []byte{
		"empty":               func(b []byte) []byte { return b[:0] },
		"shorter than a page": func(b []byte) []byte { return b[:50] },
		"one page":            func(b []byte) []byte { return b[:4096] },
		"four pages":          func(b []byte) []byte { return b[:16384] },
		"last page cut":       func(b []byte) []byte { return b[:inUse-4096] },
		"meta 0 zeroed":       func(b []byte) []byte { clear(b[:4096]); return b },
		"meta 1 zeroed":       func(b []byte) []byte { clear(b[4096:8192]); return b },
		"meta 0 byte flipped": func(b []byte) []byte { b[60] ^= 0x10; return b },
		"meta 1 byte flipped": func(b []byte) []byte { b[4096+66] ^= 0x01; return b },
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			path := boltFile(t)
			damage(t, path, f)
			_, err := CheckBoltFile(path)
			var de *DamageError
			if !errors.As(err, &de) || de.Path != path {
				t.Fatalf("CheckBoltFile = %v, want a damage error naming %s", err, path)
			}
			// OpenStore refuses it too, with the same error and no crash.
			if _, err := OpenStore(path, filepath.Dir(path)); !errors.As(err, &de) {
				t.Fatalf("OpenStore = %v", err)
			}
		})
	}
}

func TestOpenStore_RefusesAZeroedDataPage(t *testing.T) {
	path := boltFile(t)
	damage(t, path, func(b []byte) []byte {
		i := strings.Index(string(b), "entry-100 ")
		page := i / 4096 * 4096
		clear(b[page : page+4096])
		return b
	})
	var de *DamageError
	if _, err := OpenStore(path, filepath.Dir(path)); !errors.As(err, &de) {
		t.Fatalf("OpenStore = %v, want a damage error", err)
	}
}

// snapshotDir makes raftDir/snapshots with one snapshot up to index.
func snapshotDir(t *testing.T, index uint64) (raftDir, statePath string) {
	t.Helper()
	raftDir = t.TempDir()
	fs, err := raft.NewFileSnapshotStoreWithLogger(raftDir, 2, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	sink, err := fs.Create(raft.SnapshotVersionMax, index, 2, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(sink, strings.Repeat("the state of the sessions ", 100)); err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	return raftDir, filepath.Join(raftDir, "snapshots", sink.ID(), "state.bin")
}

func TestCheckSnapshots(t *testing.T) {
	t.Run("intact and covering the log", func(t *testing.T) {
		raftDir, _ := snapshotDir(t, 100)
		got, err := CheckSnapshots(raftDir, 101, true)
		if err != nil || len(got) != 1 || got[0].Index != 100 {
			t.Fatalf("CheckSnapshots = %+v, %v", got, err)
		}
	})
	t.Run("a flipped byte in state.bin", func(t *testing.T) {
		raftDir, state := snapshotDir(t, 100)
		damage(t, state, func(b []byte) []byte { b[200] ^= 0x01; return b })
		_, err := CheckSnapshots(raftDir, 101, true)
		var de *DamageError
		if !errors.As(err, &de) || de.Path != state || !strings.Contains(err.Error(), "CRC64") {
			t.Fatalf("CheckSnapshots = %v", err)
		}
	})
	t.Run("a truncated state.bin", func(t *testing.T) {
		raftDir, state := snapshotDir(t, 100)
		damage(t, state, func(b []byte) []byte { return b[:10] })
		if _, err := CheckSnapshots(raftDir, 101, true); err == nil || !strings.Contains(err.Error(), state) {
			t.Fatalf("CheckSnapshots = %v", err)
		}
	})
	t.Run("an unreadable meta.json", func(t *testing.T) {
		raftDir, state := snapshotDir(t, 100)
		meta := filepath.Join(filepath.Dir(state), "meta.json")
		damage(t, meta, func(b []byte) []byte { return b[:len(b)/2] })
		if _, err := CheckSnapshots(raftDir, 101, true); err == nil || !strings.Contains(err.Error(), meta) {
			t.Fatalf("CheckSnapshots = %v", err)
		}
	})
	t.Run("snapshots that do not cover the log", func(t *testing.T) {
		raftDir, _ := snapshotDir(t, 100)
		if _, err := CheckSnapshots(raftDir, 500, true); err == nil || !strings.Contains(err.Error(), "starts at entry 500") {
			t.Fatalf("CheckSnapshots = %v", err)
		}
	})
	t.Run("a deleted snapshots dir", func(t *testing.T) {
		raftDir, _ := snapshotDir(t, 100)
		if err := os.RemoveAll(filepath.Join(raftDir, "snapshots")); err != nil {
			t.Fatal(err)
		}
		_, err := CheckSnapshots(raftDir, 1, true)
		if err == nil || !strings.Contains(err.Error(), filepath.Join(raftDir, "snapshots")+" is missing") || strings.Contains(err.Error(), "raft.db is") {
			t.Fatalf("CheckSnapshots = %v", err)
		}
		if _, err := CheckSnapshots(raftDir, 0, false); err != nil {
			t.Fatalf("a new store without a snapshots dir: %v", err)
		}
	})
}
