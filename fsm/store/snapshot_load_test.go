package store

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// countingReader counts the bytes read through it, and the reads made
// once closed is set.
type countingReader struct {
	r         io.Reader
	n         int
	closed    atomic.Bool
	lateReads atomic.Int32
}

func (c *countingReader) Read(p []byte) (int, error) {
	if c.closed.Load() {
		c.lateReads.Add(1)
	}
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// A record that does not insert ends the load there: the decoder working
// ahead stops before Load returns, and does not read the snapshot to its end.
func TestLoad_ARefusedRecordStopsTheDecoderAhead(t *testing.T) {
	var snap bytes.Buffer
	snap.WriteString(SnapshotMagic)
	snap.WriteByte(SnapshotVersion)
	for i := uint64(1); i <= 20*decodeBatch; i++ {
		seq := i
		if i == 10 {
			seq = 5 // out of order: refused as the pager takes it
		}
		ev, err := (&fsmpb.Event{Seq: seq, SessionId: "a", Type: "step_queued", Ordinal: seq}).MarshalVT()
		if err != nil {
			t.Fatal(err)
		}
		if err := writeEventRecord(&snap, ev); err != nil {
			t.Fatal(err)
		}
	}
	before := runtime.NumGoroutine()
	in := &countingReader{r: bytes.NewReader(snap.Bytes())}
	_, err := Load(in, Routing{}, nil)
	in.closed.Store(true)
	if !errors.Is(err, ErrBadSnapshot) || !strings.Contains(err.Error(), "out of order") {
		t.Fatalf("Load = %v; want ErrBadSnapshot naming the event out of order", err)
	}
	if in.n >= snap.Len() {
		t.Fatalf("the decoder read all %d bytes after the load had stopped at the tenth record", snap.Len())
	}
	// The decoder's last act is to close its channel, which Load waits for:
	// its goroutine may still be ending, but it reads nothing more.
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if after := runtime.NumGoroutine(); after > before {
		t.Fatalf("%d goroutines 5 s after Load returned, %d before: the decoder still runs", after, before)
	}
	if n := in.lateReads.Load(); n > 0 {
		t.Fatalf("the snapshot was read %d times after Load returned", n)
	}
}
