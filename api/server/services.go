package server

import "google.golang.org/grpc"

// ServiceInfo lists the registered services and their methods (for
// metrics that create every method's series up front).
func (s *Server) ServiceInfo() map[string]grpc.ServiceInfo { return s.grpc.GetServiceInfo() }
