package metrics

import (
	gometrics "github.com/hashicorp/go-metrics/compat"
	gmprom "github.com/hashicorp/go-metrics/compat/prometheus"
	"github.com/prometheus/client_golang/prometheus"
)

// RaftSink routes hashicorp/raft's own metrics (commit time, FSM apply,
// replication, elections…) to the returned collector as raft_* families.
// raft emits through go-metrics' process-wide sink, so the last sink made
// wins. The compat packages follow the go-metrics flavour raft is built
// with.
func RaftSink() (prometheus.Collector, error) {
	sink, err := gmprom.NewPrometheusSinkFrom(gmprom.PrometheusOpts{
		Registerer: prometheus.NewRegistry(), // the caller registers it where it wants
		Name:       "dex_raft_sink",
		Expiration: 0, // keep a family once seen, so dashboards and alerts find it
	})
	if err != nil {
		return nil, err
	}
	cfg := gometrics.DefaultConfig("")
	cfg.EnableHostname = false
	cfg.EnableHostnameLabel = false
	cfg.EnableServiceLabel = false
	cfg.EnableRuntimeMetrics = false // the Go collector reports these
	if _, err := gometrics.NewGlobal(cfg, sink); err != nil {
		return nil, err
	}
	return sink, nil
}
