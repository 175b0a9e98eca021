package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// onLeader runs f against the node that serves clients (the lease holder):
// it tries each address and follows a follower's pointer to the leader. f
// gets a call option that captures the trailer carrying that pointer. During
// a takeover no node serves for a moment: it tries again until --wait ends,
// unless the nodes that answer see too few voters for a leader (no quorum).
func (g *globals) onLeader(ctx context.Context, f func(ctx context.Context, conn *grpc.ClientConn, trailer grpc.CallOption) error) error {
	deadline := time.Now().Add(g.wait)
	var noQuorumSince time.Time
	for first := true; ; first = false {
		answered, err := g.tryEach(ctx, f)
		if err == nil || !errors.Is(err, errNoneServing) || time.Now().After(deadline) {
			return err
		}
		// Nothing listens at any address: a wrong --addr, not a takeover.
		if first && errors.Is(err, errNoneReachable) {
			return err
		}
		// Lost quorum is no takeover either. It must last a moment, so that
		// nodes started one after another are not taken for a lost quorum.
		if nq := g.noQuorum(ctx, answered); nq == nil {
			noQuorumSince = time.Time{}
		} else if noQuorumSince.IsZero() {
			noQuorumSince = time.Now()
		} else if time.Since(noQuorumSince) >= noQuorumGrace {
			return nq
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

var errNoneServing = errors.New("no Dex node serving clients answered")

// noQuorumGrace is how long dexctl sees too few voters answering before it
// says so instead of waiting for a leader.
const noQuorumGrace = time.Second

// noQuorum asks the nodes that answered for the cluster's Status: a
// *client.NoQuorumError when the voters that answer are not a majority,
// else nil (also when none of them tells).
func (g *globals) noQuorum(ctx context.Context, answered []string) error {
	for _, a := range answered {
		var st *dexv1.StatusResponse
		err := g.call(ctx, a, func(ctx context.Context, c dexv1.AdminServiceClient) error {
			r, err := c.Status(ctx, &dexv1.StatusRequest{})
			st = r
			return err
		})
		if err == nil {
			return client.CheckQuorum(st)
		}
	}
	return nil
}

// errNoneReachable wraps errNoneServing when no address accepted a connection.
var errNoneReachable = fmt.Errorf("%w: no node is reachable", errNoneServing)

// unreachable reports whether err is a failure to connect at all.
func unreachable(err error) bool {
	if status.Code(err) != codes.Unavailable {
		return false
	}
	msg := status.Convert(err).Message()
	return strings.Contains(msg, "connection refused") || strings.Contains(msg, "Error while dialing") || strings.Contains(msg, "no such host")
}

// onLeaderOnce runs f on the leader, trying each address once; with no
// leader it says why: too few voters answer, or which nodes were tried.
func (g *globals) onLeaderOnce(ctx context.Context, f func(ctx context.Context, conn *grpc.ClientConn, trailer grpc.CallOption) error) error {
	answered, err := g.tryEach(ctx, f)
	if errors.Is(err, errNoneServing) {
		if nq := g.noQuorum(ctx, answered); nq != nil {
			return nq
		}
		return fmt.Errorf("no Dex leader answered%s", strings.TrimPrefix(err.Error(), errNoneServing.Error()))
	}
	return err
}

// tryEach runs f on each address in turn (and on the leader a follower
// points to) until one serves. When none does it also returns the
// addresses that answered.
func (g *globals) tryEach(ctx context.Context, f func(ctx context.Context, conn *grpc.ClientConn, trailer grpc.CallOption) error) ([]string, error) {
	addrs, err := g.list()
	if err != nil {
		return nil, err
	}
	var errs, answered []string
	reached := false
	tried := map[string]bool{}
	for len(addrs) > 0 {
		a := addrs[0]
		addrs = addrs[1:]
		if tried[a] {
			continue
		}
		tried[a] = true
		conn, err := grpc.NewClient(a, g.tls.creds(), grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(client.MaxReceive)), g.tokenOption())
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", a, err))
			continue
		}
		var md metadata.MD
		cctx, cancel := context.WithTimeout(ctx, g.timeout)
		err = f(cctx, conn, grpc.Trailer(&md))
		cancel()
		conn.Close()
		if err == nil {
			return nil, nil
		}
		if !retryable(err) {
			return nil, errors.New(status.Convert(err).Message())
		}
		if !unreachable(err) {
			reached = true
			answered = append(answered, a)
		}
		if l := md.Get(leaderKey); len(l) > 0 && !tried[l[0]] {
			addrs = append([]string{l[0]}, addrs...)
		}
		errs = append(errs, fmt.Sprintf("%s: %s", a, status.Convert(err).Message()))
	}
	if !reached {
		return nil, fmt.Errorf("%w (tried %s)", errNoneReachable, strings.Join(errs, "; "))
	}
	return answered, fmt.Errorf("%w (tried %s)", errNoneServing, strings.Join(errs, "; "))
}
