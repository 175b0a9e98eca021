package logstore

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// The cost of the checksums: the same raft-boltdb store, bare and wrapped.
// StoreLogs writes batches of 16 entries of 1 KiB (fsync on, as in dexd);
// GetLog reads one 1 KiB entry.
func benchStores(b *testing.B, f func(b *testing.B, logs raft.LogStore)) {
	for _, wrapped := range []bool{false, true} {
		name := "bare"
		if wrapped {
			name = "checked"
		}
		b.Run(name, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "raft.db")
			s, err := raftboltdb.New(raftboltdb.Options{Path: path})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			var logs raft.LogStore = s
			if wrapped {
				if logs, err = NewCheckedLogStore(s, s, path, false); err != nil {
					b.Fatal(err)
				}
			}
			f(b, logs)
		})
	}
}

func benchEntries(first uint64, n int) []*raft.Log {
	data := bytes.Repeat([]byte("0123456789abcdef"), 64)
	out := make([]*raft.Log, n)
	for i := range out {
		out[i] = &raft.Log{Index: first + uint64(i), Term: 2, Type: raft.LogCommand, Data: data, AppendedAt: time.Now()}
	}
	return out
}

func BenchmarkCheckedLog_StoreLogs16x1KiB(b *testing.B) {
	benchStores(b, func(b *testing.B, logs raft.LogStore) {
		next := uint64(1)
		b.SetBytes(16 * 1024)
		for b.Loop() {
			if err := logs.StoreLogs(benchEntries(next, 16)); err != nil {
				b.Fatal(err)
			}
			next += 16
		}
	})
}

func BenchmarkCheckedLog_GetLog1KiB(b *testing.B) {
	benchStores(b, func(b *testing.B, logs raft.LogStore) {
		const n = 1024
		for i := uint64(1); i <= n; i += 64 {
			if err := logs.StoreLogs(benchEntries(i, 64)); err != nil {
				b.Fatal(err)
			}
		}
		b.SetBytes(1024)
		i := uint64(0)
		for b.Loop() {
			var l raft.Log
			if err := logs.GetLog(i%n+1, &l); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}

// The checksum alone, per 1 KiB entry.
func BenchmarkCheckedLog_Checksum1KiB(b *testing.B) {
	l := benchEntries(1, 1)[0]
	b.SetBytes(int64(len(l.Data)))
	for b.Loop() {
		_ = entrySum(l)
	}
}
