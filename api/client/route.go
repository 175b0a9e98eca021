package client

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/balancer/base"
	"google.golang.org/protobuf/proto"

	"github.com/dexhq/dex/api/wirerules"
)

// balancerName is the load-balancing policy of a channel Dial opens: among
// the nodes whose health check reports SERVING, a call of a partitioned
// cluster goes to the leader of its session's partition when the channel
// knows it and can reach it, and round robin otherwise. Any node serves any
// call (it forwards what it does not lead), so a wrong or stale guess costs
// one hop, and the node's answer corrects it.
const balancerName = "dex_partitions"

func init() {
	balancer.Register(base.NewBalancerBuilder(balancerName, pickerBuilder{}, base.Config{HealthCheck: true}))
}

// partitionMap is what one channel has learned of its cluster's
// partitions, from the trailers of its calls (wirerules.PartitionsTrailer
// and LeaderTrailer): how many there are, and each one's leader.
type partitionMap struct {
	count   atomic.Int32
	mu      sync.RWMutex
	leaders map[int]string // partition → gRPC address
}

func newPartitionMap() *partitionMap { return &partitionMap{leaders: map[int]string{}} }

func (m *partitionMap) leader(k int) string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.leaders[k]
}

// learn records what call r, which addr served, says: the partition
// count, and the leader of its partition, the one it was forwarded to or
// addr itself when it served the call without forwarding it. A call sent
// while the count was unknown teaches its partition's leader too, once its
// own answer gives the count: a burst of calls right after it then goes
// to the leaders.
func (m *partitionMap) learn(r *callRoute, addr string, d balancer.DoneInfo) {
	if v := d.Trailer.Get(wirerules.PartitionsTrailer); len(v) > 0 {
		if n, err := strconv.Atoi(v[0]); err == nil && n > 0 && int32(n) != m.count.Load() {
			m.mu.Lock()
			m.count.Store(int32(n))
			clear(m.leaders)
			m.mu.Unlock()
		}
	}
	k := r.partition
	if k < 0 {
		k = r.hint.partitionIn(int(m.count.Load()))
	}
	if k < 0 {
		return
	}
	leader := ""
	if v := d.Trailer.Get(wirerules.LeaderTrailer); len(v) > 0 {
		leader = v[len(v)-1]
	} else if d.Err == nil && len(d.Trailer.Get(wirerules.PartitionsTrailer)) > 0 {
		leader = addr
	}
	if leader == "" || m.leader(k) == leader {
		return
	}
	m.mu.Lock()
	m.leaders[k] = leader
	m.mu.Unlock()
}

// routeHint names the partition of a call whose request the interceptor
// cannot read: a stream's (by its session) or a Worker's poll.
type routeHint struct {
	session   string
	partition int
}

type routeHintKey struct{}

// toSession marks ctx's calls as calls of session id's partition.
func toSession(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, routeHintKey{}, routeHint{session: id, partition: -1})
}

// toPartitionNumber marks ctx's calls as calls of partition k.
func toPartitionNumber(ctx context.Context, k int) context.Context {
	return context.WithValue(ctx, routeHintKey{}, routeHint{partition: k})
}

// callRoute is a call's route, read by the picker.
type callRoute struct {
	m         *partitionMap
	hint      routeHint // the session or partition the call names
	partition int       // -1: any node
}

type callRouteKey struct{}

// partitionIn is the partition the hint names in a cluster of n
// partitions (-1: none, or n unknown).
func (h routeHint) partitionIn(n int) int {
	switch {
	case n < 1:
		return -1
	case n == 1:
		// Every call of a cluster of one partition is the leader's: its
		// followers forward, so a call sent to the leader saves the hop.
		return 0
	case h.session != "":
		return wirerules.PartitionOf(h.session, n)
	}
	return h.partition
}

// route gives a call the partition its request or hint names (-1 when it
// names none, or while the count is unknown).
func (m *partitionMap) route(ctx context.Context, method string, req any) context.Context {
	h, hinted := ctx.Value(routeHintKey{}).(routeHint)
	if !hinted {
		h = routeHint{partition: -1}
		if msg, ok := req.(proto.Message); ok {
			if s, ok := wirerules.Routes[method].SessionOfRequest(msg); ok {
				h.session = s
			}
		}
	}
	r := &callRoute{m: m, hint: h, partition: h.partitionIn(int(m.count.Load()))}
	return context.WithValue(ctx, callRouteKey{}, r)
}

func (m *partitionMap) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	return invoke(m.route(ctx, method, req), method, req, reply, cc, opts...)
}

func (m *partitionMap) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, open grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return open(m.route(ctx, method, nil), desc, cc, method, opts...)
}

type pickerBuilder struct{}

func (pickerBuilder) Build(info base.PickerBuildInfo) balancer.Picker {
	if len(info.ReadySCs) == 0 {
		return base.NewErrPicker(balancer.ErrNoSubConnAvailable)
	}
	p := &picker{byAddr: make(map[string]balancer.SubConn, len(info.ReadySCs))}
	for sc, i := range info.ReadySCs {
		p.ready = append(p.ready, sc)
		p.addrs = append(p.addrs, i.Address.Addr)
		p.byAddr[i.Address.Addr] = sc
	}
	p.next.Store(rand.Uint32())
	return p
}

// picker picks a ready node for each call: its partition's leader, or the
// next node in turn.
type picker struct {
	ready  []balancer.SubConn
	addrs  []string
	byAddr map[string]balancer.SubConn
	next   atomic.Uint32
}

func (p *picker) Pick(info balancer.PickInfo) (balancer.PickResult, error) {
	r, _ := info.Ctx.Value(callRouteKey{}).(*callRoute)
	if r != nil && r.partition >= 0 {
		if addr := r.m.leader(r.partition); addr != "" {
			if sc, ok := p.byAddr[addr]; ok {
				return balancer.PickResult{SubConn: sc, Done: func(d balancer.DoneInfo) { r.m.learn(r, addr, d) }}, nil
			}
		}
	}
	i := int(p.next.Add(1) % uint32(len(p.ready)))
	res := balancer.PickResult{SubConn: p.ready[i]}
	if r != nil {
		addr := p.addrs[i]
		res.Done = func(d balancer.DoneInfo) { r.m.learn(r, addr, d) }
	}
	return res, nil
}
