package main

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

func TestMetricsShowUnhealthyWorkers(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(workerHealthCollector{health: func() []*dexv1.WorkerHealth {
		return []*dexv1.WorkerHealth{
			{WorkerId: "stuck", Unhealthy: true, UnclaimedInARow: 2, UnclaimedExpiries: 3},
			{WorkerId: "ok", UnclaimedExpiries: 1},
		}
	}})
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.Metric {
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			got[f.GetName()+"/"+m.Label[0].GetValue()] = v
		}
	}
	want := map[string]float64{
		"dex_worker_unhealthy/stuck": 1, "dex_worker_unhealthy/ok": 0,
		"dex_worker_unclaimed_expiries_total/stuck": 3, "dex_worker_unclaimed_expiries_total/ok": 1,
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("%s = %v; want %v (all: %v)", k, got[k], v, got)
		}
	}
}
