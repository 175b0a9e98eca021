package metrics

import "github.com/prometheus/client_golang/prometheus"

// Archive counts the leader's writes to the session archive (dexd
// --archive-url). Every node exports the series, at zero until it leads
// with an archive; each counts only its own writes.
type Archive struct {
	writes, failures, bytes prometheus.Counter
}

// NewArchive returns the archive's counters at zero.
func NewArchive() *Archive {
	return &Archive{
		writes: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "dex", Name: "archive_writes_total",
			Help: "Sessions this node wrote to the archive, durably, before the retention deleted them (a takeover may write one again).",
		}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "dex", Name: "archive_failures_total",
			Help: "Writes of a session to the archive that failed; the session is not deleted until a write succeeds.",
		}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "dex", Name: "archive_written_bytes_total",
			Help: "Bytes of the archived sessions this node wrote (compressed objects).",
		}),
	}
}

// Wrote counts a session written, its object n bytes.
func (a *Archive) Wrote(n int) {
	a.writes.Inc()
	a.bytes.Add(float64(n))
}

// Failed counts a write that failed.
func (a *Archive) Failed() { a.failures.Inc() }

// Collectors are the metrics to register.
func (a *Archive) Collectors() []prometheus.Collector {
	return []prometheus.Collector{a.writes, a.failures, a.bytes}
}
