package main

import (
	"github.com/prometheus/client_golang/prometheus"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

var workersUnhealthyDesc = prometheus.NewDesc("dex_workers_unhealthy",
	"Registered Workers the leader marks unhealthy now (0 when none; dex_worker_unhealthy names them). Only the leader reports it.",
	nil, nil)

// workerHealthSource is the leader's dispatcher: its epoch is 0 when it does
// not dispatch.
type workerHealthSource interface {
	Epoch() uint64
	WorkerHealth() []*dexv1.WorkerHealth
}

// unhealthyWorkersCollector counts the unhealthy Workers on the leader,
// zero included: dex_worker_unhealthy has a series only for a Worker with
// an unclaimed expiry, so an alert or a panel needs this one to tell "none"
// from "no leader".
type unhealthyWorkersCollector struct{ src workerHealthSource }

func (c unhealthyWorkersCollector) Describe(ch chan<- *prometheus.Desc) { ch <- workersUnhealthyDesc }

func (c unhealthyWorkersCollector) Collect(ch chan<- prometheus.Metric) {
	if c.src.Epoch() == 0 {
		return
	}
	n := 0
	for _, h := range c.src.WorkerHealth() {
		if h.Unhealthy {
			n++
		}
	}
	ch <- prometheus.MustNewConstMetric(workersUnhealthyDesc, prometheus.GaugeValue, float64(n))
}
