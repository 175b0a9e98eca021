package logstore

import (
	"errors"
	"io"
	"sync"

	"github.com/hashicorp/raft-wal/types"
)

// readAheadWindow is how much of a segment one read ahead brings in.
const readAheadWindow = 1 << 20

// startReads serves the reads of a start from windows read ahead. A start
// reads the log in many small reads at increasing offsets: raft-wal finds
// the entries of the open segment frame header by frame header (8 bytes a
// read), and VerifyLog reads every entry, each a read of at least 64 KiB
// whatever the entry's size. As system calls, those reads were most of a
// restart's time for a log of 10,000 entries; from a window they are
// copies. The windows last until the start ends (end) and, for the open
// segment, until its first write, so nothing written is read stale.
type startReads struct {
	mu      sync.Mutex
	on      bool
	windows []*window
}

func newStartReads() *startReads { return &startReads{on: true} }

// track returns a window over f while the start lasts, nil after.
func (s *startReads) track(f io.ReaderAt) *window {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.on {
		return nil
	}
	w := &window{file: f}
	s.windows = append(s.windows, w)
	return w
}

// end sends every read to the files again and frees the windows.
func (s *startReads) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.on = false
	for _, w := range s.windows {
		w.stop()
	}
	s.windows = nil
}

// window is one segment file's read-ahead buffers: two, so that the two
// halves VerifyLog reads at once each keep theirs.
type window struct {
	file io.ReaderAt

	mu      sync.Mutex
	stopped bool
	slots   [2]slot
	last    int // the slot read last
}

type slot struct {
	mem []byte // readAheadWindow bytes once used
	buf []byte // mem[:what the last read ahead got]
	at  int64  // the file offset of buf[0]
}

func (s *slot) holds(off, end int64) bool { return off >= s.at && end <= s.at+int64(len(s.buf)) }

// ReadAt reads p from a window, reading ahead from off into the one read
// less recently when p is in neither. A read the windows cannot serve (too
// large, past the file's end, an error) goes to the file, which answers it
// as before.
func (w *window) ReadAt(p []byte, off int64) (int, error) {
	if len(p) <= readAheadWindow/2 && w.serve(p, off) {
		return len(p), nil
	}
	return w.file.ReadAt(p, off)
}

func (w *window) serve(p []byte, off int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped || off < 0 {
		return false
	}
	end := off + int64(len(p))
	i := w.last
	if !w.slots[i].holds(off, end) {
		i = 1 - i
	}
	s := &w.slots[i]
	if !s.holds(off, end) {
		if s.mem == nil {
			s.mem = make([]byte, readAheadWindow)
		}
		n, err := w.file.ReadAt(s.mem, off)
		if err != nil && !errors.Is(err, io.EOF) {
			s.buf = nil
			return false
		}
		s.buf, s.at = s.mem[:n], off
		if !s.holds(off, end) {
			return false // past the file's end
		}
	}
	w.last = i
	copy(p, s.buf[off-s.at:])
	return true
}

// stop sends every later read to the file.
func (w *window) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped, w.slots = true, [2]slot{}
}

// aheadReader is a sealed segment read through a window.
type aheadReader struct {
	types.ReadableFile
	w *window
}

func (r aheadReader) ReadAt(p []byte, off int64) (int, error) { return r.w.ReadAt(p, off) }

// aheadWriter is the open segment read through a window until its first
// write.
type aheadWriter struct {
	types.WritableFile
	w *window
}

func (f aheadWriter) ReadAt(p []byte, off int64) (int, error) { return f.w.ReadAt(p, off) }

func (f aheadWriter) WriteAt(p []byte, off int64) (int, error) {
	f.w.stop()
	return f.WritableFile.WriteAt(p, off)
}
