// Package server holds Dex's gRPC handlers and the gRPC server that carries
// them, with server reflection and the standard health service.
package server

import (
	"net"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/tlsconf"
	"github.com/dexhq/dex/api/wirecodec"
	"github.com/dexhq/dex/cluster"
)

// DispatchService is the health service name that is SERVING only on the
// ready node (the leader holding the dispatch lease). The client and Worker
// services report the same status under their own names, which is what a
// readiness-following channel checks.
const DispatchService = "dex.v1.Dispatch"

// workerService is the health name Workers follow. It is SERVING on the ready
// node and also on a draining leader, whose running attempts still report
// to it (cluster.Node.ServesAttempts).
const workerService = "dex.v1.WorkerService"

// readinessServices are the health names that follow readiness.
var readinessServices = []string{DispatchService, workerService, "dex.v1.SessionService", "dex.v1.ScheduleService"}

// DefaultMaxPayload bounds one request (--max-payload).
const DefaultMaxPayload = 4 << 20

// Options wire the leader-only services into the server. Without Dispatch
// and Deadlines the node serves the admin service only.
type Options struct {
	// Proposer, when set, carries the client and Worker commands to raft
	// instead of the node (the leader's pipeline).
	Proposer   Proposer
	Dispatch   Dispatch
	Deadlines  Deadlines
	Timing     WorkerTiming
	MaxPayload int
	// Liveness, when set, hears every Worker's polls and heartbeats.
	Liveness Liveness
	// TLS, when set, serves mutual TLS: a client certificate of the CA is
	// required.
	TLS *tlsconf.Store
	// ACL: every call must carry a token of a role allowed to make it
	// (acl.go); health and reflection stay open.
	ACL bool
	// NodeToken is the token this node calls other nodes with; see acl.go.
	NodeToken string
	// ServerOptions are added to the gRPC server's (metrics interceptors).
	ServerOptions []grpc.ServerOption
	// Retention is how long closed sessions are kept.
	Retention Retention
	// Budgets are the agents' default budgets.
	Budgets AgentBudgets
	// Providers are the agents' providers.
	Providers AgentProviders
	// Outputs, when set, is the leader's hub of live output.
	Outputs OutputHubs
}

// Server is a node's gRPC server.
type Server struct {
	grpc   *grpc.Server
	health *health.Server
	admin  *Admin
}

// New builds the gRPC server for node.
func New(node *cluster.Node, log *zap.Logger, opts ...Options) *Server {
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	if o.MaxPayload <= 0 {
		o.MaxPayload = DefaultMaxPayload
	}
	s := &Server{
		// A request over the limit is refused with ResourceExhausted.
		grpc: grpc.NewServer(append(append(append(append(keepaliveOptions(), grpc.MaxRecvMsgSize(o.MaxPayload), serverCredentials(o.TLS), wirecodec.ServerOption()),
			o.ServerOptions...), aclOptions(node, o.ACL, o.NodeToken)...), idOptions()...)...),
		health: health.NewServer(),
		admin:  NewAdmin(node, log),
	}
	h := newHandlers(node, s.admin, o)
	dexv1.RegisterAdminServiceServer(s.grpc, s.admin)
	dexv1.RegisterSessionServiceServer(s.grpc, h.sessions)
	dexv1.RegisterScheduleServiceServer(s.grpc, h.schedules)
	if h.workers != nil {
		dexv1.RegisterWorkerServiceServer(s.grpc, h.workers)
	}
	healthpb.RegisterHealthServer(s.grpc, s.health)
	reflection.Register(s.grpc)
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	for _, name := range readinessServices {
		s.health.SetServingStatus(name, healthpb.HealthCheckResponse_NOT_SERVING)
	}
	node.OnReadyChange(func(ready bool, _ string) {
		for _, name := range readinessServices {
			serving := ready
			if name == workerService {
				// A draining leader is not ready but still serves the
				// running attempts' calls, and Workers reach it by this
				// name; it refuses their polls.
				serving, _ = node.ServesAttempts()
			}
			st := healthpb.HealthCheckResponse_NOT_SERVING
			if serving {
				st = healthpb.HealthCheckResponse_SERVING
			}
			s.health.SetServingStatus(name, st)
		}
	})
	return s
}

// handlers are one partition's service implementations.
type handlers struct {
	admin     *Admin
	sessions  *Sessions
	schedules *Schedules
	workers   *Workers // nil without Dispatch and Deadlines
}

func newHandlers(node *cluster.Node, admin *Admin, o Options) handlers {
	admin.useWorkerHealth(o.Dispatch)
	admin.live, _ = o.Liveness.(LivenessView)
	h := handlers{admin: admin, sessions: NewSessions(node, LimitsFor(o.MaxPayload)), schedules: NewSchedules(node, LimitsFor(o.MaxPayload))}
	h.schedules.p = o.Proposer
	h.schedules.providers = o.Providers
	h.sessions.p = o.Proposer
	h.sessions.retention = o.Retention
	h.sessions.budgets = o.Budgets
	h.sessions.providers = o.Providers
	h.sessions.outputs = o.Outputs
	if o.Dispatch != nil && o.Deadlines != nil {
		h.workers = NewWorkers(node, o.Dispatch, o.Deadlines, o.Timing)
		h.workers.live = o.Liveness
		h.workers.p = o.Proposer
		h.workers.outputs = o.Outputs
	}
	return h
}

// GRPC is the underlying server, for registering more services.
func (s *Server) GRPC() *grpc.Server { return s.grpc }

// Serve serves on lis until Stop.
func (s *Server) Serve(lis net.Listener) error { return s.grpc.Serve(lis) }

// Stop marks every service NOT_SERVING, waits up to timeout for calls in
// flight, then closes the connections.
func (s *Server) Stop(timeout time.Duration) {
	s.health.Shutdown()
	done := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(timeout):
		s.grpc.Stop()
	}
	s.admin.close()
}
