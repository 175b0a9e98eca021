package main

import (
	"go.opentelemetry.io/otel"
	"go.uber.org/zap"

	"github.com/dexhq/dex/api/archive"
	"github.com/dexhq/dex/api/metrics"
	"github.com/dexhq/dex/api/server"
	"github.com/dexhq/dex/cluster"
	"github.com/dexhq/dex/dispatch"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/lease"
	"github.com/dexhq/dex/lease/bulk"
	"github.com/dexhq/dex/lease/gc"
	"github.com/dexhq/dex/lease/spans"
	"github.com/dexhq/dex/lease/stream"
)

// leaderStack is one partition's leader runtime and the services it
// starts when this node leads the partition: its own epoch, broker,
// deadlines, timers and collectors (docs/design/partitions.md).
type leaderStack struct {
	node      *cluster.Node
	pipe      *dispatch.Pipeline
	nm        *metrics.Node
	deadlines *lease.Deadlines
	queues    *dispatch.Queues
	disp      *dispatch.Dispatcher
	live      *lease.Workers
	outputs   *stream.Service
	leader    *lease.Runtime
}

// newLeaderStack builds the stack on node before raft starts, so it is in
// place when this node first leads. The runtime starts the services in
// this order and stops them in the reverse one. Every leader proposal
// goes through the pipeline, which proposes the StartAttempts of waiting
// polls right behind the commands that queue their Steps.
func newLeaderStack(node *cluster.Node, o *options, store *archive.Store, archiveMetrics *metrics.Archive, log *zap.Logger) *leaderStack {
	pipe := dispatch.NewPipeline(node, node.FSM(), nil)
	nm := metrics.New(node.State)
	deadlines := lease.NewDeadlines(pipe, node, lease.DeadlinesConfig{HeartbeatTimeout: o.workerTimeout, HeartbeatInterval: o.workerHeartbeat, DefaultRunTimeout: o.runTimeout}, log)
	dcfg := dispatch.Config{OnHandedOver: nm.HandedOver, Providers: o.providerLimitsPerPartition(), AgentProviders: o.agentProviders}
	queues := dispatch.NewQueues(pipe, node, dcfg, log)
	disp := dispatch.New(pipe, node, queues, deadlines, dcfg, log)
	pipe.Pair(disp)
	timers := dispatch.NewTimers(pipe, node, queues, dispatch.Config{Partitions: o.partitions}, log)
	nm.UseBroker(queues)
	nm.UseSnapshots(node)
	events := gc.NewEvents(pipe, node, gc.EventConfig{Count: o.eventCount, Age: o.eventAge}, log)
	sessionCfg := gc.SessionConfig{Retention: o.sessionRetention}
	if store != nil {
		sessionCfg.Archive = leaderArchive{store: store, m: archiveMetrics}
	}
	sessionGC := gc.NewSessions(pipe, node, sessionCfg, log)
	folds := gc.NewFolds(pipe, node, node, gc.FoldConfig{Keep: o.keepTurnSteps}, log)
	live := lease.NewWorkers(pipe, node, queues, lease.WorkersConfig{TTL: o.workerTTL, ToolWait: o.toolWait}, log)
	outputs := stream.NewService(node, stream.DefaultLimits)
	retention := server.Retention{Default: o.retention, Agents: o.agentRetention}
	bulkJobs := bulk.New(pipe, node, bulk.Config{Retention: retention.For, Pace: o.bulkPace}, log)
	services := []lease.Service{deadlines, queues, disp, timers, events, live, sessionGC, folds, bulkJobs, outputs, nm.Leadership()}
	if o.tracing.On() {
		services = append(services, spans.New(otel.Tracer("dex.leader"), log))
	}
	leader := lease.NewRuntime(log, services...)
	return &leaderStack{node: node, pipe: pipe, nm: nm, deadlines: deadlines, queues: queues, disp: disp, live: live, outputs: outputs, leader: leader}
}

// hooks start the stack with its partition's raft group.
func (s *leaderStack) hooks() cluster.Hooks {
	return cluster.Hooks{
		LeaderServices: []cluster.LeaderService{s.leader},
		OnApplied:      func(a *fsm.Applied) { s.leader.Applied(a); s.nm.Applied(a) },
		ApplyObserver:  s.nm,
	}
}

// serverOptions wire the stack into its partition's handlers.
func (s *leaderStack) serverOptions(o *options) server.Options {
	return server.Options{
		Proposer: s.pipe, Dispatch: s.disp, Deadlines: s.deadlines, Liveness: s.live, MaxPayload: o.maxPayload,
		Timing:    server.WorkerTiming{HeartbeatInterval: s.deadlines.HeartbeatInterval(), HeartbeatTimeout: s.deadlines.HeartbeatTimeout()},
		Retention: server.Retention{Default: o.retention, Agents: o.agentRetention},
		Budgets:   server.AgentBudgets(o.agentBudgets),
		Providers: server.AgentProviders(o.agentProviders),
		Outputs:   s.outputs,
	}
}
