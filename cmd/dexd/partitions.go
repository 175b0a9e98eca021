package main

import (
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/dexhq/dex/api/server"
	"github.com/dexhq/dex/cluster"
)

// grpcServer is a node's gRPC server: one partition's (server.Server) or
// the router of several (server.Router).
type grpcServer interface {
	Serve(lis net.Listener) error
	Stop(timeout time.Duration)
	ServiceInfo() map[string]grpc.ServiceInfo
}

// partitionsReady is the readiness of a node of several partitions: it
// serves every partition (server.Router.Ready), and the leaderships it
// holds are confirmed by a quorum.
type partitionsReady struct {
	router *server.Router
	host   *cluster.Host
}

func (p partitionsReady) Ready() (bool, string) { return p.router.Ready() }

func (p partitionsReady) VerifyLeader(timeout time.Duration) error {
	for k, n := range p.host.Nodes() {
		if !n.IsLeader() {
			continue
		}
		if err := n.VerifyLeader(timeout); err != nil {
			return fmt.Errorf("partition %d: %w", k, err)
		}
	}
	return nil
}

// drainAll drains every partition this node leads at once, each as a node
// of one partition drains; a second signal ends them all.
func drainAll(stacks []*leaderStack, timeout time.Duration, again <-chan os.Signal, log *zap.Logger) {
	if len(stacks) == 1 {
		drain(stacks[0].node, timeout, again, log)
		return
	}
	signals := make([]chan os.Signal, len(stacks))
	var wg sync.WaitGroup
	for k, st := range stacks {
		signals[k] = make(chan os.Signal, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			drain(st.node, timeout, signals[k], log.With(zap.Int("partition", k)))
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case sig := <-again:
		for _, ch := range signals {
			ch <- sig
		}
		<-done
	}
}
