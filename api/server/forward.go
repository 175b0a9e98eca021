package server

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/wirerules"
	"github.com/dexhq/dex/fsm/store"
)

// connPool holds one client connection per node a router forwards to.
type connPool struct {
	dial  []grpc.DialOption
	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
}

func (p *connPool) get(addr string) (*grpc.ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.conns[addr]; ok {
		return c, nil
	}
	c, err := grpc.NewClient(addr, p.dial...)
	if err != nil {
		return nil, err
	}
	p.conns[addr] = c
	return c, nil
}

func (p *connPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for addr, c := range p.conns {
		c.Close()
		delete(p.conns, addr)
	}
}

// transportKeys are the incoming metadata gRPC itself sets, which a
// forwarded call gets afresh.
var transportKeys = []string{":authority", "content-type", "user-agent", "te", "grpc-accept-encoding", "grpc-encoding"}

// forwardContext is ctx's incoming metadata as a forwarded call's: the
// caller's token and ids kept, marked as forwarded to partition k.
func (r *Router) forwardContext(ctx context.Context, k int) context.Context {
	md, _ := metadata.FromIncomingContext(ctx)
	out := md.Copy()
	for _, key := range transportKeys {
		delete(out, key)
	}
	out.Set(forwardedMetadataKey, r.nodes[0].ID())
	out.Set(PartitionMetadataKey, partitionLabel(k))
	return metadata.NewOutgoingContext(ctx, out)
}

// forward relays a call of partition k to the node at addr, its leader,
// and relays its answers, headers and trailer back. The caller's token
// travels with it and the receiver checks it; this node's own token does
// not.
func (r *Router) forward(ss grpc.ServerStream, k int, addr, method string, first *frame) error {
	return r.forwardFrames(ss, k, addr, method, []*frame{first}, r.clientStreams(method))
}

// forwardFrames is forward for a call whose first messages the router
// read already; more: the caller sends more, to relay as they come.
func (r *Router) forwardFrames(ss grpc.ServerStream, k int, addr, method string, frames []*frame, more bool) error {
	conn, err := r.pool.get(addr)
	if err != nil {
		return status.Errorf(codes.Unavailable, "partition %d's leader at %s: %v", k, addr, err)
	}
	ctx, cancel := context.WithCancel(r.forwardContext(ss.Context(), k))
	defer cancel()
	cs, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method, grpc.ForceCodecV2(frameCodec{}))
	if err != nil {
		return err
	}
	// The leader's address lets a library send the next call of this
	// partition there itself.
	ss.SetTrailer(metadata.Pairs(wirerules.LeaderTrailer, addr))
	r.forwarded[k].Add(1)
	for _, f := range frames {
		if err := cs.SendMsg(f); err != nil {
			if errors.Is(err, io.EOF) {
				break // the leader ended the call: RecvMsg says why
			}
			return err
		}
	}
	if more {
		// The caller's later messages follow the first; an error on
		// either side ends the call, and the leader's answer says why.
		go func() {
			for {
				var f frame
				if err := ss.RecvMsg(&f); err != nil {
					if errors.Is(err, io.EOF) {
						_ = cs.CloseSend()
					} else {
						cancel()
					}
					return
				}
				if err := cs.SendMsg(&f); err != nil {
					return
				}
			}
		}()
	} else if err := cs.CloseSend(); err != nil {
		return err
	}
	if hdr, err := cs.Header(); err == nil && len(hdr) > 0 {
		if err := ss.SendHeader(hdr); err != nil {
			return err
		}
	}
	for {
		var f frame
		if err := cs.RecvMsg(&f); err != nil {
			ss.SetTrailer(cs.Trailer())
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if err := ss.SendMsg(&f); err != nil {
			return err
		}
	}
}

// callIn makes a unary call of partition k, here or at its leader, and
// decodes its answer into out.
func (r *Router) callIn(ss grpc.ServerStream, k int, method string, req *frame, out proto.Message) error {
	local := func() error {
		capture := &captureStream{ServerStream: ss}
		if err := r.parts[k].serve(capture, method, req); err != nil {
			return err
		}
		if capture.msg == nil {
			return status.Errorf(codes.Internal, "partition %d answered %s with nothing", k, method)
		}
		proto.Merge(out, capture.msg)
		return nil
	}
	return r.atLeader(ss.Context(), k, local, func(addr string) error {
		conn, err := r.pool.get(addr)
		if err != nil {
			return status.Errorf(codes.Unavailable, "partition %d's leader at %s: %v", k, addr, err)
		}
		var resp frame
		if err := conn.Invoke(r.forwardContext(ss.Context(), k), method, req, &resp, grpc.ForceCodecV2(frameCodec{})); err != nil {
			return err
		}
		return decodeFrame(&resp, out)
	})
}

// captureStream keeps the one answer of a unary handler.
type captureStream struct {
	grpc.ServerStream
	msg proto.Message
}

func (s *captureStream) SendMsg(m any) error {
	s.msg, _ = m.(proto.Message)
	return nil
}

// inPartition names partition k in an error of its.
func inPartition(k int, err error) error {
	st := status.Convert(err)
	return status.Errorf(st.Code(), "partition %d: %s", k, st.Message())
}

// fannedOut are the answers of the calls made in several partitions.
var fannedOut = map[string]func() proto.Message{
	"/dex.v1.WorkerService/RegisterWorker":   func() proto.Message { return &dexv1.RegisterWorkerResponse{} },
	"/dex.v1.WorkerService/DeregisterWorker": func() proto.Message { return &dexv1.DeregisterWorkerResponse{} },
	"/dex.v1.AdminService/Join":              func() proto.Message { return &dexv1.JoinResponse{} },
	"/dex.v1.AdminService/RemoveNode":        func() proto.Message { return &dexv1.RemoveNodeResponse{} },
}

// inPartitions makes a unary call in each partition of order, stopping at
// the first that fails, and returns partition 0's answer.
func (r *Router) inPartitions(ss grpc.ServerStream, method string, req *frame, order []int) (proto.Message, error) {
	answer, ok := fannedOut[method]
	if !ok {
		return nil, status.Errorf(codes.Internal, "%s is not made in several partitions", method)
	}
	var first proto.Message
	for _, k := range order {
		out := answer()
		if err := r.callIn(ss, k, method, req, out); err != nil {
			if k > 0 {
				err = inPartition(k, err)
			}
			return nil, err
		}
		if k == 0 {
			first = out
		}
	}
	return first, nil
}

// partitionOrder is 0, 1, …, n-1.
func partitionOrder(n int) []int {
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	return order
}

// everyPartition makes a Worker's registration or deregistration in
// partition 0, which decides on the tool catalog, then in each other
// partition in order; the answer is partition 0's, with the number of
// partitions the Worker polls.
func (r *Router) everyPartition(ss grpc.ServerStream, method string, req *frame) error {
	first, err := r.inPartitions(ss, method, req, partitionOrder(len(r.parts)))
	if err != nil {
		return err
	}
	if reg, ok := first.(*dexv1.RegisterWorkerResponse); ok {
		reg.Partitions = uint32(len(r.parts))
	}
	return ss.SendMsg(first)
}

// listSessions asks every partition for the page after the token and
// merges the answers by id, the order each partition lists in, so the
// last id of a page is the next page's token for every partition.
func (r *Router) listSessions(ss grpc.ServerStream, method string, req *frame) error {
	var in dexv1.ListSessionsRequest
	if err := decodeFrame(req, &in); err != nil {
		return status.Errorf(codes.InvalidArgument, "decode the request: %v", err)
	}
	q, err := parseListQuery(&in)
	if err != nil {
		return err
	}
	var pages []*dexv1.ListSessionsResponse
	for k := range r.parts {
		var out dexv1.ListSessionsResponse
		if err := r.callIn(ss, k, method, req, &out); err != nil {
			return inPartition(k, err)
		}
		pages = append(pages, &out)
	}
	resp, err := mergeSessionPages(q, pages)
	if err != nil {
		return err
	}
	return ss.SendMsg(resp)
}

// withinPageBytes is how many of ss a page holds within pageBytes (at
// least one).
func withinPageBytes(ss []*dexv1.SessionSummary) int {
	size := 0
	for i, s := range ss {
		if size += proto.Size(s); size > pageBytes && i > 0 {
			return i
		}
	}
	return len(ss)
}

// mergeSessionPages merges the partitions' pages of one request into the
// cluster's page. Every partition was asked with the same token, a
// position in a total order (id, or time then id), so each page holds its
// partition's first sessions after it. A partition whose page ended short
// of the end (its token) has read nothing beyond its token's position: the
// merged page stops at the earliest such position, and goes on from it.
func mergeSessionPages(q *listQuery, pages []*dexv1.ListSessionsResponse) (*dexv1.ListSessionsResponse, error) {
	var all []*dexv1.SessionSummary
	if q.byID {
		more := false
		for _, p := range pages {
			all = append(all, p.Sessions...)
			more = more || p.NextPageToken != ""
		}
		slices.SortFunc(all, func(a, b *dexv1.SessionSummary) int { return strings.Compare(a.Id, b.Id) })
		resp := &dexv1.ListSessionsResponse{Sessions: all}
		if len(all) > q.size {
			resp.Sessions, more = all[:q.size], true
		}
		if n := withinPageBytes(resp.Sessions); n < len(resp.Sessions) {
			resp.Sessions, more = resp.Sessions[:n], true
		}
		if more && len(resp.Sessions) > 0 {
			resp.NextPageToken = resp.Sessions[len(resp.Sessions)-1].Id
		}
		return resp, nil
	}
	pos := func(s *dexv1.SessionSummary) store.ListPosition {
		return store.ListPosition{At: summaryAt(s, q.order), ID: s.Id}
	}
	var cut *store.ListPosition
	for _, p := range pages {
		all = append(all, p.Sessions...)
		if p.NextPageToken == "" {
			continue
		}
		next, err := parseListToken(p.NextPageToken, q.order, q.desc)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "a partition's page token: %v", err)
		}
		if cut == nil || comparePositions(*next, *cut, q.desc) < 0 {
			cut = next
		}
	}
	slices.SortFunc(all, func(a, b *dexv1.SessionSummary) int { return comparePositions(pos(a), pos(b), q.desc) })
	if cut != nil {
		n := 0
		for n < len(all) && comparePositions(pos(all[n]), *cut, q.desc) <= 0 {
			n++
		}
		all = all[:n]
	}
	resp := &dexv1.ListSessionsResponse{Sessions: all}
	if n := min(q.size, withinPageBytes(all)); n < len(all) {
		resp.Sessions = all[:n]
		last := pos(resp.Sessions[n-1])
		cut = &last
	}
	resp.NextPageToken = listToken(cut, q.order, q.desc)
	return resp, nil
}

// members makes a membership change in every partition's group: a join
// in partition 0 first, whose nodes table is the cluster's member list,
// then in each other; a removal in the others first and in partition 0
// last. The answer is partition 0's. A change that fails part way is
// made again by retrying it: each step is idempotent.
func (r *Router) members(ss grpc.ServerStream, method string, req *frame) error {
	order := partitionOrder(len(r.parts))
	if strings.HasSuffix(method, "/RemoveNode") {
		slices.Reverse(order)
	}
	first, err := r.inPartitions(ss, method, req, order)
	if err != nil {
		return err
	}
	return ss.SendMsg(first)
}

// clientStreams reports whether method's caller sends a stream of
// messages (an import, a restore).
func (r *Router) clientStreams(method string) bool {
	svcName, name, _ := strings.Cut(strings.TrimPrefix(method, "/"), "/")
	if svc, ok := r.parts[0].services[svcName]; ok {
		for _, st := range svc.desc.Streams {
			if st.StreamName == name {
				return st.ClientStreams
			}
		}
	}
	return false
}
