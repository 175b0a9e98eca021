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
	"github.com/dexhq/dex/cluster"
)

// DispatchService is the health service name that is SERVING only on the
// ready node (the leader holding the dispatch lease).
const DispatchService = "dex.v1.Dispatch"

// Server is a node's gRPC server.
type Server struct {
	grpc   *grpc.Server
	health *health.Server
	admin  *Admin
}

// New builds the gRPC server for node.
func New(node *cluster.Node, log *zap.Logger) *Server {
	s := &Server{
		grpc:   grpc.NewServer(),
		health: health.NewServer(),
		admin:  NewAdmin(node, log),
	}
	dexv1.RegisterAdminServiceServer(s.grpc, s.admin)
	healthpb.RegisterHealthServer(s.grpc, s.health)
	reflection.Register(s.grpc)
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	node.OnReadyChange(func(ready bool, _ string) {
		st := healthpb.HealthCheckResponse_NOT_SERVING
		if ready {
			st = healthpb.HealthCheckResponse_SERVING
		}
		s.health.SetServingStatus(DispatchService, st)
	})
	return s
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
