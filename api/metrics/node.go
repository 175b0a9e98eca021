// Package metrics is the Prometheus instrumentation of a dexd node: what
// dispatch, the state machine and the leader do, read from the hooks they
// offer (dispatch.Config.OnHandedOver, cluster.ApplyObserver,
// fsm.Applied, the broker's counts), plus hashicorp/raft's own metrics and
// the gRPC server's.
//
// Every node applies every entry, so the counters and histograms fed from
// Apply agree across nodes (a restarted node counts the entries it replays
// again); the leader-only gauges exist only on the leader.
package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// Node holds a node's Dex metrics. Build it with New before the node
// opens, wire its hooks, then register its Collectors.
type Node struct {
	state func() *fsm.State

	dispatchLatency *prometheus.HistogramVec
	claimLatency    *prometheus.HistogramVec
	stepDuration    *prometheus.HistogramVec
	applyDuration   *prometheus.HistogramVec
	attempts        *prometheus.CounterVec
	rejected        *prometheus.CounterVec
	takeovers       prometheus.Counter
	modelTokens     *prometheus.CounterVec
	modelCost       *prometheus.CounterVec
	keyTokens       *prometheus.CounterVec
	keyCost         *prometheus.CounterVec
	fairnessKeys    *boundedLabels

	// Children bound once, so the hot paths do no label hashing.
	dispatchByKind map[fsmpb.StepKind]prometheus.Observer
	claimByKind    map[fsmpb.StepKind]prometheus.Observer
	applyByCommand map[int32]prometheus.Observer // by Command body field number

	tools  toolLabels
	gauges *gauges
}

// New returns the metrics of a node whose state state reads (it may be
// called before the node is open: it then reads an empty state).
func New(state func() *fsm.State) *Node {
	m := &Node{
		state: state,
		dispatchLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "dex", Name: "dispatch_latency_seconds",
			Help:    "From a Step becoming ready (queued, or its retry backoff over) until the leader hands it to a Worker, its StartAttempt committed; by Step kind.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 14),
		}, []string{"kind"}),
		claimLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "dex", Name: "claim_latency_seconds",
			Help:    "From an attempt's start (the task handed over) until its claim committed, by the commands' times; by Step kind.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 14),
		}, []string{"kind"}),
		stepDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "dex", Name: "step_duration_seconds",
			Help:    "From a Step's creation until it is done, every attempt and wait included; by kind, tool (catalog tools and built-ins; others are _unknown) and outcome.",
			Buckets: prometheus.ExponentialBuckets(0.01, 3, 14),
		}, []string{"kind", "tool", "outcome"}),
		applyDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "dex", Name: "apply_duration_seconds",
			Help:    "Time the state machine spent per applied entry, by command type. The entries of a raft batch share one transaction: each gets its share of the batch's time.",
			Buckets: prometheus.ExponentialBuckets(0.00001, 3, 12),
		}, []string{"command"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "dex", Name: "attempts_total",
			Help: "Attempts that ended, by Step kind, outcome (succeeded, failed, expired, cancelled) and error type (none on success).",
		}, []string{"kind", "outcome", "error_type"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "dex", Name: "rejected_commands_total",
			Help: "Committed commands the state machine rejected (they changed nothing), by command type and reason code.",
		}, []string{"command", "code"}),
		takeovers: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "dex", Name: "takeovers_total",
			Help: "Times this node established leadership (barrier passed, epoch opened, leader services started).",
		}),
		modelTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "dex", Name: "model_tokens_total",
			Help: "Tokens the model calls that succeeded reported, by agent, model and kind (input, output). Every node counts what it applies.",
		}, []string{"agent", "model", "kind"}),
		modelCost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "dex", Name: "model_cost_total",
			Help: "Cost, in millionths of the Workers' currency unit, the model calls that succeeded reported, by agent.",
		}, []string{"agent"}),
		keyTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "dex", Name: "fairness_key_tokens_total",
			Help: "Tokens (input + output) the model calls that succeeded reported, by their session's fairness key (none: no key; past 64 keys the rest count as _other).",
		}, []string{"fairness_key"}),
		keyCost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "dex", Name: "fairness_key_cost_total",
			Help: "Cost, in millionths of the Workers' currency unit, the model calls that succeeded reported, by their session's fairness key.",
		}, []string{"fairness_key"}),
		fairnessKeys:   &boundedLabels{max: maxFairnessKeyLabels},
		dispatchByKind: map[fsmpb.StepKind]prometheus.Observer{},
		claimByKind:    map[fsmpb.StepKind]prometheus.Observer{},
		applyByCommand: map[int32]prometheus.Observer{},
	}
	for v := range fsmpb.StepKind_name {
		k := fsmpb.StepKind(v)
		if fsm.Kind(k).Dispatched() {
			m.dispatchByKind[k] = m.dispatchLatency.WithLabelValues(fsm.KindName(k))
			m.claimByKind[k] = m.claimLatency.WithLabelValues(fsm.KindName(k))
		}
	}
	for num, name := range commandNames {
		m.applyByCommand[num] = m.applyDuration.WithLabelValues(name)
	}
	m.gauges = &gauges{m: m, cacheFor: sessionsCacheFor}
	return m
}

// UseBroker gives the gauges the leader's broker counts. Call it before
// the first scrape.
func (m *Node) UseBroker(b BrokerGauges) { m.gauges.leader = b }

// UseSnapshots gives the gauges the node's snapshot store, for
// dex_snapshot_bytes. Call it before the first scrape.
func (m *Node) UseSnapshots(s SnapshotSizes) { m.gauges.snapshots = s }

// Collectors are the metrics to register.
func (m *Node) Collectors() []prometheus.Collector {
	return []prometheus.Collector{
		m.dispatchLatency, m.claimLatency, m.stepDuration, m.applyDuration,
		m.attempts, m.rejected, m.takeovers, m.modelTokens, m.modelCost, m.keyTokens, m.keyCost, m.gauges,
	}
}

// HandedOver is dispatch.Config.OnHandedOver: the task of st went to a
// Worker now. The Step was ready from its ready time (a retry's backoff
// end) or, for a first attempt, from its creation.
func (m *Node) HandedOver(st *fsmpb.Step, _ *fsmpb.Attempt) {
	o := m.dispatchByKind[st.Kind]
	if o == nil {
		return
	}
	readyMs := max(st.ReadyAtMs, st.CreatedAtMs)
	o.Observe(seconds(time.Now().UnixMilli() - readyMs))
}

func seconds(ms int64) float64 { return float64(max(ms, 0)) / 1000 }

// toolLabels bounds the tool label: tools of the catalog and the built-ins,
// at most maxTools distinct names; a model may name any tool, which must
// not make a series.
type toolLabels struct {
	mu   sync.Mutex
	seen map[string]bool
}

const maxTools = 256

func (t *toolLabels) label(st *fsm.State, tool string) string {
	if tool == "" || fsm.IsBuiltin(tool) {
		return tool
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.seen[tool] {
		return tool
	}
	if st == nil || st.Tool(tool) == nil {
		return "_unknown"
	}
	if len(t.seen) >= maxTools {
		return "_other"
	}
	if t.seen == nil {
		t.seen = map[string]bool{}
	}
	t.seen[tool] = true
	return tool
}
