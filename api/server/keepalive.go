package server

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// keepaliveOptions let Workers and clients ping (the Go library pings every
// 10 s, gRPC's shortest interval, even with no call open) without being
// sent away: gRPC's default policy closes a connection that pings more
// often than every 5 minutes or with no call open.
func keepaliveOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
		MinTime:             5 * time.Second,
		PermitWithoutStream: true,
	})}
}
