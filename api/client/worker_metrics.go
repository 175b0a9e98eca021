package client

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// WorkerMetrics are a Worker's own Prometheus metrics; give it to
// WorkerOptions.Metrics and register it where you serve /metrics:
//
//	m := client.NewWorkerMetrics()
//	prometheus.MustRegister(m)
//	w, err := client.NewWorker(conn, client.WorkerOptions{Metrics: m, ...})
//
// Families: dex_worker_tasks_total{kind,outcome} (outcome: completed,
// failed, cancelled, cannot_run, claim_refused, report_refused) and
// dex_worker_handler_duration_seconds{kind,outcome} (outcome: ok, error).
type WorkerMetrics struct {
	tasks   *prometheus.CounterVec
	handler *prometheus.HistogramVec
}

// NewWorkerMetrics returns a Worker's metrics, not registered.
func NewWorkerMetrics() *WorkerMetrics {
	return &WorkerMetrics{
		tasks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "dex", Subsystem: "worker", Name: "tasks_total",
			Help: "Tasks this Worker received, by Step kind and how they ended here: completed, failed (reported as a failure), cancelled (by the cluster), cannot_run, claim_refused, report_refused.",
		}, []string{"kind", "outcome"}),
		handler: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "dex", Subsystem: "worker", Name: "handler_duration_seconds",
			Help:    "Time the model or tool handler ran for one task, by Step kind and result (ok or error).",
			Buckets: prometheus.ExponentialBuckets(0.005, 3, 12),
		}, []string{"kind", "outcome"}),
	}
}

// Describe implements prometheus.Collector.
func (m *WorkerMetrics) Describe(ch chan<- *prometheus.Desc) {
	m.tasks.Describe(ch)
	m.handler.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *WorkerMetrics) Collect(ch chan<- prometheus.Metric) {
	m.tasks.Collect(ch)
	m.handler.Collect(ch)
}

// Task outcomes.
const (
	taskCompleted     = "completed"
	taskFailed        = "failed"
	taskCancelled     = "cancelled"
	taskCannotRun     = "cannot_run"
	taskClaimRefused  = "claim_refused"
	taskReportRefused = "report_refused"
)

func kindLabel(k dexv1.StepKind) string {
	return strings.ToLower(strings.TrimPrefix(k.String(), "STEP_KIND_"))
}

// task counts a task's outcome; a nil WorkerMetrics counts nothing.
func (m *WorkerMetrics) task(k dexv1.StepKind, outcome string) {
	if m != nil {
		m.tasks.WithLabelValues(kindLabel(k), outcome).Inc()
	}
}

func (m *WorkerMetrics) handled(k dexv1.StepKind, ok bool, took time.Duration) {
	if m == nil {
		return
	}
	outcome := "ok"
	if !ok {
		outcome = "error"
	}
	m.handler.WithLabelValues(kindLabel(k), outcome).Observe(took.Seconds())
}
