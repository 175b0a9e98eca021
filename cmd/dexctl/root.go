package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// leaderKey is the trailer a follower sets with the leader's gRPC address.
const leaderKey = "dex-leader"

type globals struct {
	addrs   string
	timeout time.Duration
	wait    time.Duration
	token   string
	tls     tlsFlags
}

func newRootCmd() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "dexctl",
		Short:         "Operate a Dex cluster",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&g.addrs, "addr", "127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103", "gRPC addresses of cluster nodes, comma separated")
	root.PersistentFlags().DurationVar(&g.timeout, "timeout", 2*time.Second, "timeout for each node tried")
	root.PersistentFlags().DurationVar(&g.wait, "wait", 15*time.Second, "session commands: how long to keep looking for the node that serves clients (a takeover takes a few seconds)")
	root.PersistentFlags().StringVar(&g.token, "token", "", "ACL token secret sent on every call (default $DEX_TOKEN)")
	g.tls.register(root)
	root.PersistentPreRunE = func(*cobra.Command, []string) error { return g.tls.load() }
	root.AddCommand(newStatusCmd(g), newNodeCmd(g), newSessionCmd(g), newScheduleCmd(g), newSnapshotCmd(g), newTLSCmd(), newTokenCmd(g), newACLCmd(g), newWorkersCmd(g), newBulkCmd(g))
	root.AddCommand(newStepCmds(g)...)
	markUsage(root)
	return root
}

// list returns the --addr addresses. Each needs its port: gRPC would
// dial an address without one at 443, where no Dex node listens.
func (g *globals) list() ([]string, error) {
	var out []string
	for _, a := range strings.Split(g.addrs, ",") {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		_, port, err := net.SplitHostPort(a)
		switch {
		case err != nil && strings.Contains(err.Error(), "missing port"), err == nil && port == "":
			return nil, usagef("address %s has no port: give HOST:PORT, the node's --grpc-addr", a)
		case err != nil:
			return nil, usagef("address %s is not HOST:PORT", a)
		}
		out = append(out, a)
	}
	if len(out) == 0 {
		return nil, usagef("--addr is empty")
	}
	return out, nil
}

// anyNode calls f on each address in turn until one answers.
func (g *globals) anyNode(ctx context.Context, f func(ctx context.Context, c dexv1.AdminServiceClient) error) error {
	addrs, err := g.list()
	if err != nil {
		return err
	}
	var errs []string
	for _, a := range addrs {
		err := g.call(ctx, a, func(ctx context.Context, c dexv1.AdminServiceClient) error { return f(ctx, c) })
		if err == nil {
			return nil
		}
		if !retryable(err) {
			return errors.New(status.Convert(err).Message())
		}
		errs = append(errs, fmt.Sprintf("%s: %s", a, status.Convert(err).Message()))
	}
	return fmt.Errorf("no Dex node answered (tried %s)", strings.Join(errs, "; "))
}

// leader calls f on the leader: it tries each address and follows a
// follower's pointer to the leader.
func (g *globals) leader(ctx context.Context, f func(ctx context.Context, c dexv1.AdminServiceClient) error) error {
	return g.onLeaderOnce(ctx, func(ctx context.Context, conn *grpc.ClientConn, trailer grpc.CallOption) error {
		return f(ctx, trailerClient{dexv1.NewAdminServiceClient(conn), trailer})
	})
}

func retryable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.Unknown:
		return true
	}
	return false
}

func (g *globals) call(ctx context.Context, addr string, f func(ctx context.Context, c dexv1.AdminServiceClient) error) error {
	conn, err := grpc.NewClient(addr, g.tls.creds(), g.tokenOption())
	if err != nil {
		return status.Error(codes.Unavailable, err.Error())
	}
	defer conn.Close()
	cctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	return f(cctx, dexv1.NewAdminServiceClient(conn))
}

// trailerClient captures the trailer of leader-only calls.
type trailerClient struct {
	dexv1.AdminServiceClient
	trailer grpc.CallOption
}

func (t trailerClient) RemoveNode(ctx context.Context, in *dexv1.RemoveNodeRequest, opts ...grpc.CallOption) (*dexv1.RemoveNodeResponse, error) {
	return t.AdminServiceClient.RemoveNode(ctx, in, append(opts, t.trailer)...)
}

func (t trailerClient) TransferLeadership(ctx context.Context, in *dexv1.TransferLeadershipRequest, opts ...grpc.CallOption) (*dexv1.TransferLeadershipResponse, error) {
	return t.AdminServiceClient.TransferLeadership(ctx, in, append(opts, t.trailer)...)
}
