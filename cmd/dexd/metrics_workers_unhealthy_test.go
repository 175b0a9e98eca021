package main

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

type fakeWorkerHealth struct {
	epoch   uint64
	workers []*dexv1.WorkerHealth
}

func (f fakeWorkerHealth) Epoch() uint64                       { return f.epoch }
func (f fakeWorkerHealth) WorkerHealth() []*dexv1.WorkerHealth { return f.workers }

func TestMetricsCountUnhealthyWorkersOnTheLeader(t *testing.T) {
	const head = `
# HELP dex_workers_unhealthy Registered Workers the leader marks unhealthy now (0 when none; dex_worker_unhealthy names them). Only the leader reports it.
# TYPE dex_workers_unhealthy gauge
`
	for _, tc := range []struct {
		name string
		src  fakeWorkerHealth
		want string
	}{
		{"leader with two unhealthy of three", fakeWorkerHealth{epoch: 4, workers: []*dexv1.WorkerHealth{
			{WorkerId: "a", Unhealthy: true}, {WorkerId: "b", UnclaimedExpiries: 1}, {WorkerId: "c", Unhealthy: true},
		}}, head + "dex_workers_unhealthy 2\n"},
		{"leader with every Worker healthy", fakeWorkerHealth{epoch: 4}, head + "dex_workers_unhealthy 0\n"},
		{"follower", fakeWorkerHealth{workers: []*dexv1.WorkerHealth{{WorkerId: "a", Unhealthy: true}}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := testutil.CollectAndCompare(unhealthyWorkersCollector{tc.src}, strings.NewReader(tc.want), "dex_workers_unhealthy"); err != nil {
				t.Fatal(err)
			}
		})
	}
}
