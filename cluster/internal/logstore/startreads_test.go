package logstore

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
)

// segmentFile writes size random bytes to a file and opens it read-write.
func segmentFile(t *testing.T, size int) (*os.File, []byte) {
	t.Helper()
	data := make([]byte, size)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	path := filepath.Join(t.TempDir(), "seg.wal")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, data
}

// Every read through a window answers as the file does: the bytes, how
// many, and io.EOF at the end, for reads the windows hold, reads past the
// file's end and reads too large for a window.
func TestWindow_AnswersEveryReadAsTheFileDoes(t *testing.T) {
	const size = 3*readAheadWindow + 123
	f, _ := segmentFile(t, size)
	w := newStartReads().track(f)
	r := rand.New(rand.NewPCG(3, 4))
	lengths := []int{8, 4, 65536, 700 << 10, readAheadWindow / 2}
	for i := range 3000 {
		n := lengths[i%len(lengths)]
		var off int64
		switch i % 3 {
		case 0: // forward, as a start reads
			off = int64(i) * 4096 % size
		case 1: // anywhere
			off = r.Int64N(size)
		default: // near and past the end
			off = size - int64(r.IntN(2*n+16))
		}
		got, want := make([]byte, n), make([]byte, n)
		gn, gerr := w.ReadAt(got, off)
		wn, werr := f.ReadAt(want, off)
		if gn != wn || !bytes.Equal(got[:gn], want[:wn]) || (gerr == nil) != (werr == nil) || errors.Is(gerr, io.EOF) != errors.Is(werr, io.EOF) {
			t.Fatalf("read %d at %d: window %d, %v; file %d, %v", n, off, gn, gerr, wn, werr)
		}
	}
}

// The open segment's window stops at its first write: what was written
// is what is read, never the bytes read ahead before it.
func TestWindow_AWriteIsReadBack(t *testing.T) {
	f, data := segmentFile(t, 2*readAheadWindow)
	w := aheadWriter{WritableFile: f, w: newStartReads().track(f)}
	got := make([]byte, 16)
	if _, err := w.ReadAt(got, 1000); err != nil || !bytes.Equal(got, data[1000:1016]) {
		t.Fatalf("first read: %v", err)
	}
	if _, err := w.WriteAt([]byte("written-after-ok"), 1000); err != nil {
		t.Fatal(err)
	}
	if _, err := w.ReadAt(got, 1000); err != nil || string(got) != "written-after-ok" {
		t.Fatalf("read after the write = %q, %v", got, err)
	}
}

// Once the start ends, every read goes to the file again.
func TestStartReads_EndSendsReadsToTheFile(t *testing.T) {
	f, data := segmentFile(t, readAheadWindow)
	s := newStartReads()
	r := aheadReader{ReadableFile: f, w: s.track(f)}
	got := make([]byte, 8)
	if _, err := r.ReadAt(got, 64); err != nil || !bytes.Equal(got, data[64:72]) {
		t.Fatalf("first read: %v", err)
	}
	if _, err := f.WriteAt([]byte("changed!"), 64); err != nil { // as no segment is, to see where reads go
		t.Fatal(err)
	}
	if _, err := r.ReadAt(got, 64); err != nil || !bytes.Equal(got, data[64:72]) {
		t.Fatalf("during the start the window answers: %q, %v", got, err)
	}
	s.end()
	if _, err := r.ReadAt(got, 64); err != nil || string(got) != "changed!" {
		t.Fatalf("after the start = %q, %v", got, err)
	}
	if s.track(f) != nil {
		t.Fatal("a file opened after the start got a window")
	}
}

// A WAL reopened reads every entry back through the windows, appends after
// them, and reads old and new entries alike, before and after the start
// ends.
func TestWAL_AStartReadsAheadThenAppends(t *testing.T) {
	n := newWALNode(t)
	logs, close := n.mustOpen()
	body := func(i uint64) string { return fmt.Sprintf("entry-%d-%s", i, bytes.Repeat([]byte{'x'}, int(i%700))) }
	for i := uint64(1); i <= 3000; i++ {
		if err := logs.StoreLogs([]*raft.Log{entry(i, body(i))}); err != nil {
			t.Fatal(err)
		}
	}
	close()

	logs, close = n.mustOpen() // VerifyLog read all 3,000 through the windows
	defer close()
	check := func(from, to uint64) {
		t.Helper()
		for i := from; i <= to; i++ {
			var l raft.Log
			if err := logs.GetLog(i, &l); err != nil || string(l.Data) != body(i) {
				t.Fatalf("entry %d: %q, %v", i, l.Data, err)
			}
		}
	}
	storeEntriesWith := func(from, to uint64) {
		for i := from; i <= to; i++ {
			if err := logs.StoreLogs([]*raft.Log{entry(i, body(i))}); err != nil {
				t.Fatal(err)
			}
		}
	}
	storeEntriesWith(3001, 3100) // the open segment's first write stops its window
	check(1, 3100)
	logs.LogStore.(*WALStore).StartChecked()
	storeEntriesWith(3101, 3200)
	check(1, 3200)
}
