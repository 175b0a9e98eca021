package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/dexhq/dex/api/archive/format"
	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/wirerules"
	"github.com/dexhq/dex/cluster"
)

// Router is the gRPC server of a node, of one partition or several
// (docs/design/partitions.md). It serves each call with the handlers of
// the partition the call belongs to (wirerules.Routes): on this node when it leads
// that partition, else by forwarding the call to the node that does. Any
// healthy node therefore answers any call, and a client or Worker sees one
// cluster.
type Router struct {
	grpc   *grpc.Server
	health *health.Server
	nodes  []*cluster.Node // partition k's raft group is nodes[k]
	parts  []*partitionHandlers
	log    *zap.Logger

	pool connPool
	// picked spreads the sessions that name no id over the partitions.
	picked atomic.Uint64

	stop     chan struct{}
	stopOnce sync.Once
	ready    atomic.Pointer[readiness]
	// forwarded counts, per partition, the calls this node forwarded to
	// its leader.
	forwarded []atomic.Uint64
	// servedAt is when each partition was last served (serves, under
	// readyMu).
	readyMu  sync.Mutex
	servedAt []time.Time
}

type readiness struct {
	ok     bool
	reason string
}

// partitionHandlers are one partition's service implementations and the
// checks a call to them passes first (ids, then the token).
type partitionHandlers struct {
	node     *cluster.Node
	services map[string]service
	admin    *Admin
	acl      *acl // nil: no tokens required
}

type service struct {
	impl any
	desc *grpc.ServiceDesc
}

// NewRouter builds the server of a node whose partition k is nodes[k];
// opts[k] wires partition k's leader services, and opts[0] also gives what
// the node's server shares (TLS, tokens, payload limit, gRPC options).
func NewRouter(nodes []*cluster.Node, log *zap.Logger, opts []Options) *Router {
	o := opts[0]
	if o.MaxPayload <= 0 {
		o.MaxPayload = DefaultMaxPayload
	}
	registry := nodes[0]
	r := &Router{
		health: health.NewServer(),
		nodes:  nodes,
		log:    log,
		pool: connPool{dial: []grpc.DialOption{registry.DialCredentials(), grpc.WithConnectParams(forwardReconnect),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(forwardMaxMessage), grpc.MaxCallSendMsgSize(forwardMaxMessage))},
			conns: map[string]*grpc.ClientConn{}},
		stop: make(chan struct{}),
	}
	// Every call but health's reaches handle, which routes it; a request
	// over the limit is refused with ResourceExhausted.
	r.grpc = grpc.NewServer(append(append(keepaliveOptions(), grpc.MaxRecvMsgSize(o.MaxPayload), serverCredentials(o.TLS),
		grpc.ForceServerCodecV2(frameCodec{}), grpc.UnknownServiceHandler(r.handle)), o.ServerOptions...)...)
	for k, node := range nodes {
		po := opts[k]
		po.MaxPayload = o.MaxPayload
		h := newHandlers(node, NewAdmin(node, log), po)
		h.sessions.partition, h.sessions.partitions = k, len(nodes)
		h.schedules.partitions = len(nodes)
		h.admin.partitions = nodes
		p := &partitionHandlers{node: node, admin: h.admin, services: map[string]service{
			dexv1.AdminService_ServiceDesc.ServiceName:   {h.admin, &dexv1.AdminService_ServiceDesc},
			dexv1.SessionService_ServiceDesc.ServiceName: {h.sessions, &dexv1.SessionService_ServiceDesc},
			// Schedules live in partition 0 (wirerules.Routes): the other
			// partitions' handlers are never reached.
			dexv1.ScheduleService_ServiceDesc.ServiceName: {h.schedules, &dexv1.ScheduleService_ServiceDesc},
		}}
		if h.workers != nil {
			p.services[dexv1.WorkerService_ServiceDesc.ServiceName] = service{h.workers, &dexv1.WorkerService_ServiceDesc}
		}
		if o.ACL {
			p.acl = &acl{state: registry.State, nodeToken: o.NodeToken, steps: node.State}
		}
		r.parts = append(r.parts, p)
	}
	healthpb.RegisterHealthServer(r.grpc, r.health)
	r.registerReflection()
	r.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	r.servedAt = make([]time.Time, len(r.parts))
	r.forwarded = make([]atomic.Uint64, len(r.parts))
	r.refreshReadiness()
	// A leadership established or lost changes the health services at
	// once, as /readyz/leader sees it, not at the next tick.
	for _, node := range nodes {
		node.OnReadyChange(func(bool, string) { r.refreshReadiness() })
	}
	go r.followReadiness()
	return r
}

// ServiceInfo lists the services the router serves and their methods.
func (r *Router) ServiceInfo() map[string]grpc.ServiceInfo {
	out := map[string]grpc.ServiceInfo{}
	for name, svc := range r.parts[0].services {
		var info grpc.ServiceInfo
		for _, m := range svc.desc.Methods {
			info.Methods = append(info.Methods, grpc.MethodInfo{Name: m.MethodName})
		}
		for _, st := range svc.desc.Streams {
			info.Methods = append(info.Methods, grpc.MethodInfo{Name: st.StreamName, IsClientStream: st.ClientStreams, IsServerStream: st.ServerStreams})
		}
		out[name] = info
	}
	return out
}

// Serve serves on lis until Stop.
func (r *Router) Serve(lis net.Listener) error { return r.grpc.Serve(lis) }

// Stop marks every service NOT_SERVING, waits up to timeout for calls in
// flight, then closes the connections.
func (r *Router) Stop(timeout time.Duration) {
	r.stopOnce.Do(func() { close(r.stop) })
	r.health.Shutdown()
	done := make(chan struct{})
	go func() {
		r.grpc.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(timeout):
		r.grpc.Stop()
	}
	r.pool.close()
	for _, p := range r.parts {
		p.admin.close()
	}
}

// Ready reports whether this node serves every partition: each has a
// leader this node can reach it at and keeps up with, and each one this
// node leads is ready. Otherwise the reason names the first partition that is not. A
// partition that had one within leaderWait counts as served while it
// elects the next: a call of it waits here for that leader, and a call of
// any other partition must not wait on its election.
func (r *Router) Ready() (bool, string) {
	rd := r.ready.Load()
	return rd.ok, rd.reason
}

func (r *Router) serves(now time.Time) readiness {
	for k, node := range r.nodes {
		reason := partitionServed(k, node, len(r.nodes) > 1)
		if reason == "" {
			r.servedAt[k] = now
			continue
		}
		// A draining node is not ready at once: it is going away, and its
		// callers should move now, not after the grace of an election.
		if r.servedAt[k].IsZero() || now.Sub(r.servedAt[k]) > leaderWait || node.Draining() {
			return readiness{reason: reason}
		}
	}
	return readiness{ok: true}
}

// partitionServed is why this node cannot serve partition k now ("" when
// it can), naming the partition on a node of several.
func partitionServed(k int, node *cluster.Node, several bool) string {
	named := func(reason string) string {
		if !several {
			return reason
		}
		return fmt.Sprintf("partition %d: %s", k, reason)
	}
	if ok, reason := node.MemberReady(); !ok {
		return named(reason)
	}
	if node.IsLeader() {
		return ""
	}
	l := node.Leader()
	switch {
	case l == nil:
		return named("no leader is known")
	case l.GrpcAddress == "":
		return named(fmt.Sprintf("the leader %s has not recorded its gRPC address yet", l.Id))
	}
	return ""
}

// followReadiness keeps the health services in step with serves.
func (r *Router) followReadiness() {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-tick.C:
		}
		r.refreshReadiness()
	}
}

// refreshReadiness sets the health services from serves now.
func (r *Router) refreshReadiness() {
	r.readyMu.Lock()
	defer r.readyMu.Unlock()
	r.setReadiness(r.serves(time.Now()))
}

func (r *Router) setReadiness(rd readiness) {
	if old := r.ready.Swap(&rd); old != nil && old.ok == rd.ok {
		return
	}
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if rd.ok {
		st = healthpb.HealthCheckResponse_SERVING
	}
	for _, name := range readinessServices {
		r.health.SetServingStatus(name, st)
	}
}

// handle serves every call but health's: it reads the first message,
// finds its partition and serves it there.
func (r *Router) handle(_ any, ss grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(ss)
	rt, ok := wirerules.Routes[method]
	if !ok {
		return status.Errorf(codes.Unimplemented, "unknown method %s", method)
	}
	if rt.Kind == wirerules.Imported {
		return r.importSession(ss, method)
	}
	var first frame
	if err := ss.RecvMsg(&first); err != nil {
		return err
	}
	md, _ := metadata.FromIncomingContext(ss.Context())
	if len(md.Get(forwardedMetadataKey)) > 0 {
		// Another node routed it here: serve it, or refuse it as a
		// follower does; never forward it again.
		k, err := polledPartition(md, len(r.parts))
		if err != nil {
			return status.Error(codes.InvalidArgument, err.Error())
		}
		return r.parts[k].serve(ss, method, &first)
	}
	switch rt.Kind {
	case wirerules.EveryPartition:
		return r.everyPartition(ss, method, &first)
	case wirerules.Merged:
		return r.listSessions(ss, method, &first)
	case wirerules.Bulk:
		return r.bulk(ss, method, &first)
	case wirerules.Members:
		return r.members(ss, method, &first)
	case wirerules.Local:
		k, err := polledPartition(md, len(r.parts))
		if err != nil {
			return status.Error(codes.InvalidArgument, err.Error())
		}
		return r.parts[k].serve(ss, method, &first)
	}
	// The partition count tells a library to route its next calls itself.
	ss.SetTrailer(metadata.Pairs(wirerules.PartitionsTrailer, strconv.Itoa(len(r.parts))))
	k, err := partitionOf(rt, first.b, md, len(r.parts), r.pick)
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	return r.serveIn(k, ss, method, &first)
}

// pick is the partition of a session that names no id: one this node
// leads when it leads any, so the call takes no hop, in turn.
func (r *Router) pick() int {
	n := uint64(len(r.parts))
	start := r.picked.Add(1)
	for i := range n {
		k := int((start + i) % n)
		if r.parts[k].node.IsLeader() {
			return k
		}
	}
	return int(start % n)
}

// Forwarded is how many calls of partition k this node forwarded to the
// partition's leader: few once clients and Workers route by the partition
// map (wirerules.LeaderTrailer).
func (r *Router) Forwarded(k int) uint64 { return r.forwarded[k].Load() }

// serveIn serves a call of partition k here when this node leads it, or
// forwards it to its leader.
func (r *Router) serveIn(k int, ss grpc.ServerStream, method string, first *frame) error {
	return r.atLeader(ss.Context(), k,
		func() error { return r.parts[k].serve(ss, method, first) },
		func(addr string) error { return r.forward(ss, k, addr, method, first) })
}

// atLeader runs a call of partition k: local when this node leads it (or
// knows of no leader to send it to, and its handler refuses it naming
// what it knows), remote at the leader's address otherwise. While the
// partition has no leader, or one that cannot be dialled (it died, and
// this node has not heard of the next one yet), the call waits for the
// next, up to leaderWait: it was not sent, so it is sent once, to the
// leader that takes over.
func (r *Router) atLeader(ctx context.Context, k int, local func() error, remote func(addr string) error) error {
	node := r.parts[k].node
	deadline := time.Now().Add(leaderWait)
	for {
		if node.IsLeader() {
			return local()
		}
		l := node.Leader()
		if l == nil || l.GrpcAddress == "" {
			if r.waitFor(ctx, deadline, func() bool { l := node.Leader(); return l != nil && l.GrpcAddress != "" }) {
				continue
			}
		}
		if l == nil || l.GrpcAddress == "" || l.Id == node.ID() {
			return local()
		}
		err := remote(l.GrpcAddress)
		if !notDialled(err) {
			return err
		}
		// Try again when the leader changes, or, if it does not, once
		// the connection had time to redial (forwardReconnect): a node
		// that restarted and took the leadership back answers again.
		was, redial := l.Id, time.Now().Add(forwardReconnect.Backoff.MaxDelay)
		if !r.waitFor(ctx, deadline, func() bool { l := node.Leader(); return l == nil || l.Id != was || time.Now().After(redial) }) {
			return err
		}
	}
}

// forwardReconnect redials a leader's address within a quarter second:
// gRPC's default back-off grows to minutes while a node is down, and the
// node may come back and lead again long before the next try.
var forwardReconnect = grpc.ConnectParams{
	Backoff:           grpcbackoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 250 * time.Millisecond},
	MinConnectTimeout: 2 * time.Second,
}

// forwardMaxMessage bounds a message a forward relays, each way: as large
// as the libraries take (client.MaxReceive), since gRPC's default of 4 MiB
// refused a session read that the leader answers whole to its callers.
const forwardMaxMessage = 256 << 20

// leaderWait bounds how long a call waits for a partition's next leader
// when its leader cannot be dialled: a few election timeouts.
const leaderWait = 5 * time.Second

// notDialled reports whether a forward failed before the call left this
// node: its connection to the leader could not be made.
func notDialled(err error) bool {
	st, ok := status.FromError(err)
	return ok && st.Code() == codes.Unavailable && strings.Contains(st.Message(), "Error while dialing")
}

// waitFor polls cond until it holds (true), or the deadline or the call's
// end comes first (false).
func (r *Router) waitFor(ctx context.Context, deadline time.Time, cond func() bool) bool {
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
	return false
}

// serve runs the partition's handler of method on this node, with the
// first message the router read and then the rest of the caller's stream.
func (p *partitionHandlers) serve(ss grpc.ServerStream, method string, first *frame) error {
	return p.serveFrames(ss, method, []*frame{first}, true)
}

// serveFrames runs the handler of method with the messages the router read
// (a unary handler takes the first), then, when more, the caller's stream.
func (p *partitionHandlers) serveFrames(ss grpc.ServerStream, method string, frames []*frame, more bool) error {
	svcName, name, _ := strings.Cut(strings.TrimPrefix(method, "/"), "/")
	svc, ok := p.services[svcName]
	if !ok {
		return status.Errorf(codes.Unimplemented, "this node serves no %s", svcName)
	}
	for _, m := range svc.desc.Methods {
		if m.MethodName == name {
			resp, err := m.Handler(svc.impl, ss.Context(), func(v any) error { return decodeFrame(frames[0], v) }, p.unaryChecks(method))
			if err != nil {
				return err
			}
			return ss.SendMsg(resp)
		}
	}
	for _, st := range svc.desc.Streams {
		if st.StreamName == name {
			if p.acl != nil {
				if err := p.acl.authorize(ss.Context(), method, nil); err != nil {
					return err
				}
			}
			return st.Handler(svc.impl, &replayStream{ServerStream: ss, frames: frames, more: more})
		}
	}
	return status.Errorf(codes.Unimplemented, "unknown method %s", method)
}

// unaryChecks are the checks a unary call passes before its handler, as
// a node of one partition runs them in its interceptors.
func (p *partitionHandlers) unaryChecks(method string) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if err := checkIDs(req); err != nil {
			return nil, err
		}
		if p.acl != nil {
			if err := p.acl.authorize(ctx, method, req); err != nil {
				return nil, err
			}
		}
		return h(ctx, req)
	}
}

// replayStream gives a stream handler the messages the router read, each
// checked as idOptions check a stream's, then the rest of the caller's
// stream (more) or its end.
type replayStream struct {
	grpc.ServerStream
	frames []*frame
	more   bool
}

func (s *replayStream) RecvMsg(m any) error {
	if len(s.frames) > 0 {
		f := s.frames[0]
		s.frames = s.frames[1:]
		if err := decodeFrame(f, m); err != nil {
			return status.Errorf(codes.InvalidArgument, "decode the request: %v", err)
		}
		return checkIDs(m)
	}
	if !s.more {
		return io.EOF
	}
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return checkIDs(m)
}

// partitionLabel is k as the dex-partition metadata carries it.
func partitionLabel(k int) string { return strconv.Itoa(k) }

// importSession reads a whole import (the server holds it whole anyway),
// finds the session it holds from the object's header, and serves it in
// that session's partition; an object it cannot read goes to partition 0,
// whose handler refuses it in its own words.
func (r *Router) importSession(ss grpc.ServerStream, method string) error {
	var frames []*frame
	var obj []byte
	for {
		f := &frame{}
		if err := ss.RecvMsg(f); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return err
		}
		var req dexv1.ImportSessionRequest
		if err := decodeFrame(f, &req); err != nil {
			return status.Errorf(codes.InvalidArgument, "decode the request: %v", err)
		}
		if len(obj)+len(req.Chunk) > MaxImportObject {
			return status.Errorf(codes.InvalidArgument, "an archived session to import is at most %d bytes; this one is larger", MaxImportObject)
		}
		obj = append(obj, req.Chunk...)
		frames = append(frames, f)
	}
	k := 0
	if id, err := format.SessionID(obj); err == nil {
		k = wirerules.PartitionOf(id, len(r.parts))
	}
	local := func() error { return r.parts[k].serveFrames(ss, method, slices.Clone(frames), false) }
	return r.atLeader(ss.Context(), k, local, func(addr string) error {
		return r.forwardFrames(ss, k, addr, method, frames, false)
	})
}
