package server

import (
	"maps"

	"google.golang.org/grpc"
	"google.golang.org/grpc/reflection"
)

// reflectionSource lists the router's services to server reflection: the
// ones it serves through its unknown-service handler (Router.ServiceInfo)
// besides the ones registered on the gRPC server (health, reflection).
type reflectionSource struct {
	*grpc.Server
	router *Router
}

func (s reflectionSource) GetServiceInfo() map[string]grpc.ServiceInfo {
	out := s.Server.GetServiceInfo()
	maps.Copy(out, s.router.ServiceInfo())
	return out
}

// registerReflection serves server reflection (v1 and v1alpha) for every
// service the router answers, as grpcurl and grpcui expect.
func (r *Router) registerReflection() {
	reflection.Register(reflectionSource{Server: r.grpc, router: r})
}
