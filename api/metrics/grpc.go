package metrics

import (
	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
)

// GRPC is the gRPC server's metrics (go-grpc-middleware's Prometheus
// provider): grpc_server_started_total, grpc_server_handled_total by
// method and code, grpc_server_handling_seconds, message counts.
type GRPC struct {
	m *grpcprom.ServerMetrics
}

// NewGRPC returns the gRPC server metrics, with the handling-time
// histogram.
func NewGRPC() *GRPC {
	return &GRPC{m: grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram(
		grpcprom.WithHistogramBuckets([]float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 15, 30, 60}),
	))}
}

// ServerOptions are the interceptors to give grpc.NewServer.
func (g *GRPC) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(g.m.UnaryServerInterceptor()),
		grpc.ChainStreamInterceptor(g.m.StreamServerInterceptor()),
	}
}

// Initialize creates every method's series at zero, so rates and alerts
// see them before the first call.
func (g *GRPC) Initialize(services map[string]grpc.ServiceInfo) {
	g.m.InitializeMetrics(serviceInfo(services))
}

type serviceInfo map[string]grpc.ServiceInfo

func (s serviceInfo) GetServiceInfo() map[string]grpc.ServiceInfo { return s }

// Collector is the metrics to register.
func (g *GRPC) Collector() prometheus.Collector { return g.m }
