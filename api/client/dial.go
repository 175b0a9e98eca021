// Package client is Dex's Go client: a readiness-following gRPC channel, a
// Client for the SessionService and a Worker that runs model and tool calls
// for the cluster.
package client

import (
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	_ "google.golang.org/grpc/health" // client-side health checking
	"google.golang.org/grpc/resolver"

	"github.com/dexhq/dex/api/wirecodec"
)

// Scheme is the resolver scheme of a static list of Dex nodes:
// dex:///host1:port1,host2:port2,host3:port3.
const Scheme = "dex"

// HealthService is the health-checked service name: a cluster of one
// partition reports it SERVING only on the node that holds the dispatch
// lease, a cluster of several on every node that serves them all.
const HealthService = "dex.v1.WorkerService"

// ServiceConfig returns a service config that balances over the nodes whose
// health service reports healthService SERVING: round robin, or to the
// leader of a call's partition (route.go).
func ServiceConfig(healthService string) string {
	return fmt.Sprintf(`{"loadBalancingConfig":[{%q:{}}],"healthCheckConfig":{"serviceName":%q}}`, balancerName, healthService)
}

// DefaultServiceConfig follows the node that serves HealthService.
var DefaultServiceConfig = ServiceConfig(HealthService)

func init() { resolver.Register(dexBuilder{}) }

// Dial opens a channel to a Dex cluster. target is either
// "dex:///h1:p1,h2:p2,h3:p3" (every node; the channel uses only the nodes
// whose health check reports SERVING, i.e. the lease holder, and follows it
// after a takeover; with several partitions, each call goes to its
// partition's leader) or one "host:port" of a load balancer that checks
// /readyz. The
// channel is plaintext unless opts say otherwise; opts come after the
// defaults, so they override them (e.g. grpc.WithDefaultServiceConfig).
// The channel leaves a node that stops answering within DetectTime (see
// liveness.go).
func Dial(target string, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	if strings.HasPrefix(target, Scheme+":") {
		if len(splitAddrs(endpointOf(target))) == 0 {
			return nil, fmt.Errorf("dex target %q names no address", target)
		}
	}
	live := newLiveness()
	for _, o := range opts {
		if t, ok := o.(tlsOption); ok {
			live.creds = t.creds
		}
	}
	routes := newPartitionMap()
	base := []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(routes.unary),
		grpc.WithChainStreamInterceptor(routes.stream),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(DefaultServiceConfig),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxReceive)),
		grpc.WithContextDialer(live.dial),
		grpc.WithKeepaliveParams(keepaliveParams),
		grpc.WithConnectParams(reconnectParams),
		wirecodec.DialOption(),
	}
	return grpc.NewClient(target, append(base, opts...)...)
}

// reconnectParams: gRPC's default reconnect back-off starts at 1 s and grows
// to 2 minutes. During a takeover no node is ready for a second or so, and a
// load balancer closes the connections it has no server for, so every
// reconnect in that window fails; with the default the channel then sleeps
// past the moment the new leader is ready. Starting at 50 ms and capped at
// 250 ms, it finds the new leader within a quarter second of it turning
// ready; a refused connect every 250 ms costs nothing.
var reconnectParams = grpc.ConnectParams{
	Backoff:           grpcbackoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 250 * time.Millisecond},
	MinConnectTimeout: 5 * time.Second,
}

// MaxReceive is the largest answer the library accepts. A cluster refuses a
// request over its --max-payload, bounds a model input to half of it and
// pages what it shows, but one poll may carry several tasks: gRPC's default
// of 4 MiB would refuse a poll that the cluster can legitimately send.
const MaxReceive = 256 << 20

func endpointOf(target string) string {
	s := strings.TrimPrefix(target, Scheme+":")
	s = strings.TrimPrefix(s, "//")
	if i := strings.Index(s, "/"); i >= 0 {
		s = s[i+1:]
	}
	return s
}

func splitAddrs(s string) []string {
	var out []string
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// dexBuilder resolves dex:///a,b,c to the static address list a, b, c.
type dexBuilder struct{}

func (dexBuilder) Scheme() string { return Scheme }

func (dexBuilder) Build(t resolver.Target, cc resolver.ClientConn, _ resolver.BuildOptions) (resolver.Resolver, error) {
	addrs := splitAddrs(t.Endpoint())
	if len(addrs) == 0 {
		return nil, fmt.Errorf("dex target %q names no address", t.URL.String())
	}
	st := resolver.State{}
	for _, a := range addrs {
		// ServerName: over TLS each node's certificate is checked against
		// its own address, not the target's.
		st.Endpoints = append(st.Endpoints, resolver.Endpoint{Addresses: []resolver.Address{{Addr: a, ServerName: a}}})
		st.Addresses = append(st.Addresses, resolver.Address{Addr: a, ServerName: a})
	}
	if err := cc.UpdateState(st); err != nil {
		return nil, err
	}
	return nopResolver{}, nil
}

type nopResolver struct{}

func (nopResolver) ResolveNow(resolver.ResolveNowOptions) {}
func (nopResolver) Close()                                {}
