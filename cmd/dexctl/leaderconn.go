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
)

// onLeader runs f against the node that serves clients (the lease holder):
// it tries each address and follows a follower's pointer to the leader. f
// gets a call option that captures the trailer carrying that pointer. During
// a takeover no node serves for a moment: it tries again until --wait ends.
func (g *globals) onLeader(ctx context.Context, f func(ctx context.Context, conn *grpc.ClientConn, trailer grpc.CallOption) error) error {
	deadline := time.Now().Add(g.wait)
	for first := true; ; first = false {
		err := g.onLeaderOnce(ctx, f)
		if err == nil || !errors.Is(err, errNoneServing) || time.Now().After(deadline) {
			return err
		}
		// Nothing listens at any address: a wrong --addr, not a takeover.
		if first && errors.Is(err, errNoneReachable) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

var errNoneServing = errors.New("no Dex node serving clients answered")

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

func (g *globals) onLeaderOnce(ctx context.Context, f func(ctx context.Context, conn *grpc.ClientConn, trailer grpc.CallOption) error) error {
	addrs, err := g.list()
	if err != nil {
		return err
	}
	var errs []string
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
			return nil
		}
		if !retryable(err) {
			return errors.New(status.Convert(err).Message())
		}
		reached = reached || !unreachable(err)
		if l := md.Get(leaderKey); len(l) > 0 && !tried[l[0]] {
			addrs = append([]string{l[0]}, addrs...)
		}
		errs = append(errs, fmt.Sprintf("%s: %s", a, status.Convert(err).Message()))
	}
	if !reached {
		return fmt.Errorf("%w (tried %s)", errNoneReachable, strings.Join(errs, "; "))
	}
	return fmt.Errorf("%w (tried %s)", errNoneServing, strings.Join(errs, "; "))
}
