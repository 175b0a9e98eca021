package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dexhq/dex/dispatch"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// BrokerGauges gives the leader's broker counts (ok false when not leading).
type BrokerGauges interface {
	Gauges() (dispatch.Gauges, bool)
}

var (
	queueDepthDesc = prometheus.NewDesc("dex_queue_depth",
		"Ready Steps waiting for a Worker, by queue (model or tool), tool and agent (empty: the default agent). Only the leader reports it.",
		[]string{"queue", "tool", "agent"}, nil)
	timersPendingDesc = prometheus.NewDesc("dex_timers_pending",
		"AwaitTimer Steps (sleeps) not fired yet, due or not. Only the leader reports it.", nil, nil)
	attemptsRunningDesc = prometheus.NewDesc("dex_attempts_running",
		"Attempts running now (Steps held by a Worker).", nil, nil)
	workersDesc = prometheus.NewDesc("dex_workers",
		"Registered Workers: the leader deregisters one silent for the Worker TTL.", nil, nil)
	sessionsDesc = prometheus.NewDesc("dex_sessions",
		"Sessions by status. Counted through the status index, at most once per 15 s (a walk of every session row).",
		[]string{"status"}, nil)
	sessionLifecycleDesc = prometheus.NewDesc("dex_session_lifecycle",
		"Sessions by lifecycle state: open, closing (closed while a turn runs), closed (kept until its retention passes), deleted (rows being purged). Counted in the same walk as dex_sessions, at most once per 15 s.",
		[]string{"state"}, nil)
	stateBytesDesc = prometheus.NewDesc("dex_state_bytes",
		"Encoded bytes of the replicated state by table, kept as entries apply (reading it costs nothing): the same on every node at the same applied index.",
		[]string{"table"}, nil)
	stateRowsDesc = prometheus.NewDesc("dex_state_rows",
		"Rows of the replicated state by table (an event counts as one), kept as entries apply.",
		[]string{"table"}, nil)
	providerRunningDesc = prometheus.NewDesc("dex_provider_running",
		"Model Steps running (or being handed out) against a provider with a limit (dexd --provider-limit). Only each partition's leader reports it.",
		[]string{"provider"}, nil)
	providerThrottledDesc = prometheus.NewDesc("dex_provider_throttled",
		"Ready model Steps a provider's hold or limit keeps from the Workers now. Only each partition's leader reports it.",
		[]string{"provider"}, nil)
	providerHoldDesc = prometheus.NewDesc("dex_provider_hold_seconds",
		"Seconds left of a provider's hold, set by a rate_limit failure's Retry-After (0: not held). Only each partition's leader reports it.",
		[]string{"provider"}, nil)
	snapshotBytesDesc = prometheus.NewDesc("dex_snapshot_bytes",
		"Size of the newest raft snapshot this node keeps on disk (absent until it has one).", nil, nil)
)

// SnapshotSizes tells the size of the newest snapshot a node keeps.
type SnapshotSizes interface {
	LastSnapshot() (size int64, index uint64, ok bool)
}

// maxAgentLabels bounds the agent label values of one scrape.
const maxAgentLabels = 64

// sessionsCacheFor bounds how often a scrape walks the sessions: counting
// them visits every row (about 50 ns each), so a million sessions cost
// some 50 ms at most every 15 s.
const sessionsCacheFor = 15 * time.Second

// gauges reads the gauges at scrape time: the broker's counts (kept as it
// goes), the running Steps and the Workers through their indexes (bounded
// by the Workers' capacity and number), the sessions through a cached walk.
type gauges struct {
	m         *Node
	leader    BrokerGauges
	snapshots SnapshotSizes
	cacheFor  time.Duration

	mu       sync.Mutex
	sessions fsm.SessionCounts
	at       time.Time
}

func (g *gauges) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{queueDepthDesc, timersPendingDesc, providerRunningDesc, providerThrottledDesc, providerHoldDesc, attemptsRunningDesc, workersDesc, sessionsDesc, sessionLifecycleDesc, stateBytesDesc, stateRowsDesc, snapshotBytesDesc} {
		ch <- d
	}
}

func (g *gauges) Collect(ch chan<- prometheus.Metric) {
	if g.leader != nil {
		if b, ok := g.leader.Gauges(); ok {
			g.collectBroker(ch, b)
		}
	}
	if g.snapshots != nil {
		if size, _, ok := g.snapshots.LastSnapshot(); ok {
			ch <- prometheus.MustNewConstMetric(snapshotBytesDesc, prometheus.GaugeValue, float64(size))
		}
	}
	if g.m.state == nil {
		return
	}
	st := g.m.state()
	for _, t := range st.TableSizes() {
		ch <- prometheus.MustNewConstMetric(stateBytesDesc, prometheus.GaugeValue, float64(t.Bytes), t.Table)
		ch <- prometheus.MustNewConstMetric(stateRowsDesc, prometheus.GaugeValue, float64(t.Rows), t.Table)
	}
	running, _ := st.RunningSteps()
	ch <- prometheus.MustNewConstMetric(attemptsRunningDesc, prometheus.GaugeValue, float64(running))
	ch <- prometheus.MustNewConstMetric(workersDesc, prometheus.GaugeValue, float64(st.WorkerCount()))

	g.mu.Lock()
	if g.sessions.ByStatus == nil || time.Since(g.at) >= g.cacheFor {
		g.sessions, g.at = st.SessionCounts(), time.Now()
	}
	sessions := g.sessions
	g.mu.Unlock()
	for v, n := range sessions.ByStatus {
		if v == fsmpb.SessionStatus_SESSION_STATUS_UNSPECIFIED {
			continue
		}
		ch <- prometheus.MustNewConstMetric(sessionsDesc, prometheus.GaugeValue, float64(n), word(v.String(), "SESSION_STATUS_"))
	}
	for state, n := range sessions.ByLifecycle {
		ch <- prometheus.MustNewConstMetric(sessionLifecycleDesc, prometheus.GaugeValue, float64(n), state)
	}
}

func (g *gauges) collectBroker(ch chan<- prometheus.Metric, b dispatch.Gauges) {
	st := g.m.state
	depth := map[[3]string]int{{"model", "", ""}: 0} // the default agent's model queue is always shown
	agents := map[string]bool{"": true}
	for _, q := range b.Queues {
		// Agents are named by clients: past maxAgentLabels the rest share one.
		agent := q.Agent
		if !agents[agent] {
			if len(agents) >= maxAgentLabels {
				agent = "_other"
			} else {
				agents[agent] = true
			}
		}
		if q.Model {
			depth[[3]string{"model", "", agent}] += q.Ready
			continue
		}
		tool := q.Tool
		if st != nil {
			tool = g.m.tools.label(st(), q.Tool)
		}
		depth[[3]string{"tool", tool, agent}] += q.Ready
	}
	for k, n := range depth {
		ch <- prometheus.MustNewConstMetric(queueDepthDesc, prometheus.GaugeValue, float64(n), k[0], k[1], k[2])
	}
	ch <- prometheus.MustNewConstMetric(timersPendingDesc, prometheus.GaugeValue, float64(b.TimersPending))
	for _, p := range b.Providers {
		ch <- prometheus.MustNewConstMetric(providerRunningDesc, prometheus.GaugeValue, float64(p.Running), p.Name)
		ch <- prometheus.MustNewConstMetric(providerThrottledDesc, prometheus.GaugeValue, float64(p.Throttled), p.Name)
		ch <- prometheus.MustNewConstMetric(providerHoldDesc, prometheus.GaugeValue, p.HeldFor.Seconds(), p.Name)
	}
}
