package main

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/dexhq/dex/api/metrics"
	"github.com/dexhq/dex/cluster"
)

// readySource is what the readiness paths ask. /readyz: the node is a
// healthy member that serves every partition, here or by forwarding to its
// leader (load balancers and Kubernetes send calls to every such node).
// /readyz/leader: the node leads (a node of one partition: it is the
// leader; of several: it leads one) and every partition it leads is ready,
// for a balancer that sends everything to the leader.
type readySource interface {
	Ready() (bool, string)
	LeaderReady() (bool, string)
	// VerifyLeader confirms with a quorum each leadership this node holds.
	VerifyLeader(timeout time.Duration) error
}

// partitionMetrics are one partition's collectors and its raft group.
type partitionMetrics struct {
	node       *cluster.Node
	collectors []prometheus.Collector
}

// httpHandler serves /healthz, /readyz and /metrics: the node-wide
// collectors, then each partition's. A node of several partitions labels
// each partition's series with partition="K"; a node of one does not, as
// before partitions.
func httpHandler(ready readySource, parts []partitionMetrics, extra ...prometheus.Collector) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(extra...)
	for k, p := range parts {
		var r prometheus.Registerer = reg
		if len(parts) > 1 {
			r = prometheus.WrapRegistererWith(prometheus.Labels{"partition": strconv.Itoa(k)}, reg)
		}
		r.MustRegister(p.collectors...)
		registerMetrics(r, p.node)
	}

	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", readyHandler(ready.Ready, ready.VerifyLeader))
	mux.HandleFunc("/readyz/leader", readyHandler(ready.LeaderReady, ready.VerifyLeader))
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	return mux
}

// readyHandler answers 200 when ready holds and every leadership this
// node holds is confirmed by a quorum: a deposed leader that has not heard
// of the new term yet must not take traffic.
func readyHandler(ready func() (bool, string), verify func(time.Duration) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if ok, reason := ready(); !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(reason + "\n"))
			return
		}
		if err := verify(readyzVerifyTimeout); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte("cannot confirm the leadership with a quorum: " + err.Error() + "\n"))
			return
		}
		w.Write([]byte("ready\n"))
	}
}

// readyzVerifyTimeout bounds the quorum round trip of one /readyz.
const readyzVerifyTimeout = 500 * time.Millisecond

func registerMetrics(reg prometheus.Registerer, node *cluster.Node) {
	gauge := func(name, help string, f func() float64) {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "dex", Name: name, Help: help}, f))
	}
	gauge("raft_state", "Raft state: 0 follower, 1 candidate, 2 leader, 3 shutdown.", func() float64 {
		return float64(node.Raft().State())
	})
	gauge("raft_term", "Current raft term.", func() float64 { return float64(node.Raft().CurrentTerm()) })
	gauge("raft_commit_index", "Raft commit index.", func() float64 { return float64(node.Raft().CommitIndex()) })
	gauge("raft_applied_index", "Raft applied index.", func() float64 { return float64(node.Raft().AppliedIndex()) })
	gauge("raft_last_index", "Last raft log index.", func() float64 { return float64(node.Raft().LastIndex()) })
	gauge("epoch", "Dispatch epoch in the replicated state.", func() float64 {
		return float64(node.State().Meta().GetEpoch())
	})
	counter := func(name, help string, f func() float64) {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "dex", Name: name, Help: help}, f))
	}
	counter("raft_foreign_connections_total", "Raft connections refused because the other side belongs to another cluster.", func() float64 {
		return float64(node.ForeignConnections())
	})
	counter("raft_refused_votes_total", "Vote requests refused before raft saw them (from a non-voter, or a leadership-transfer vote beyond the current term + 1).", func() float64 {
		return float64(node.RefusedVotes())
	})
	gauge("ready", "1 when this node is ready (established leader, apply keeps up).", func() float64 {
		if ok, _ := node.Ready(); ok {
			return 1
		}
		return 0
	})
	reg.MustRegister(metrics.NewVoterHealth(node.Raft(), node.ID()))
}
