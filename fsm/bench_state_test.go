package fsm

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
	"time"
)

// BenchmarkState100k builds 100,000 idle one-turn sessions ("hello", then a
// one-word answer) and reports what the state costs: heap bytes per session
// after a GC, the snapshot's size, and the time to persist and to restore it.
// One iteration is enough: `go test ./fsm -run '^$' -bench State100k -benchtime 1x`.
func BenchmarkState100k(b *testing.B) {
	const n = 100_000
	for range b.N {
		b.StopTimer()
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		d := newDriver(b)
		for i := range n {
			id := fmt.Sprintf("s%06d", i)
			d.createSession(id, "", "hello")
			d.startNext(id, kRunModel).claim().answer("hi")
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heap-B/session")

		start := time.Now()
		var buf bytes.Buffer
		if err := d.f.Snapshot().Persist(&buf); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "persist-ms")
		b.ReportMetric(float64(buf.Len())/n, "snapshot-B/session")
		start = time.Now()
		if err := New(Options{}).Restore(&buf); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "restore-ms")
		runtime.KeepAlive(d)
	}
}
