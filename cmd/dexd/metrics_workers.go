package main

import (
	"github.com/prometheus/client_golang/prometheus"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/server"
)

var (
	workerUnhealthyDesc = prometheus.NewDesc("dex_worker_unhealthy",
		"1 when the leader marked the Worker unhealthy: its tasks expired unclaimed twice in a row and it has not claimed one since. Only the leader reports it.",
		[]string{"worker"}, nil)
	workerUnclaimedDesc = prometheus.NewDesc("dex_worker_unclaimed_expiries_total",
		"Attempts of the Worker that expired before it claimed them, counted by the current leader (restarts at a takeover).",
		[]string{"worker"}, nil)
)

// workerHealthCollector exports the leader's Worker health, read at each
// scrape.
type workerHealthCollector struct {
	health func() []*dexv1.WorkerHealth
}

func (c workerHealthCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- workerUnhealthyDesc
	ch <- workerUnclaimedDesc
}

func (c workerHealthCollector) Collect(ch chan<- prometheus.Metric) {
	for _, h := range c.health() {
		unhealthy := 0.0
		if h.Unhealthy {
			unhealthy = 1
		}
		ch <- prometheus.MustNewConstMetric(workerUnhealthyDesc, prometheus.GaugeValue, unhealthy, h.WorkerId)
		ch <- prometheus.MustNewConstMetric(workerUnclaimedDesc, prometheus.CounterValue, float64(h.UnclaimedExpiries), h.WorkerId)
	}
}

// forwardedCollector counts the calls of partition k this node forwarded
// to the partition's leader.
func forwardedCollector(r *server.Router, k int) prometheus.Collector {
	return prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: "dex", Name: "forwarded_calls_total",
		Help: "Calls of the partition this node received and forwarded to its leader. Libraries that route by the partition map send few.",
	}, func() float64 { return float64(r.Forwarded(k)) })
}
