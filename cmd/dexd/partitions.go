package main

import (
	"fmt"
	"os"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/dexhq/dex/api/server"
	"github.com/dexhq/dex/cluster"
)

// nodeReadiness is the readiness of a node, of one partition or several:
// /readyz when it serves every partition (server.Router.Ready), and
// /readyz/leader when it leads a partition and every partition it leads
// is ready; the leaderships either rests on are confirmed by a quorum.
type nodeReadiness struct {
	router *server.Router
	nodes  []*cluster.Node
}

func (p nodeReadiness) Ready() (bool, string) { return p.router.Ready() }

func (p nodeReadiness) LeaderReady() (bool, string) {
	if len(p.nodes) == 1 {
		return p.nodes[0].Ready()
	}
	led := 0
	for k, n := range p.nodes {
		if !n.IsLeader() {
			continue
		}
		led++
		if ok, reason := n.Ready(); !ok {
			return false, fmt.Sprintf("partition %d: %s", k, reason)
		}
	}
	if led == 0 {
		return false, "this node leads no partition"
	}
	return true, ""
}

func (p nodeReadiness) VerifyLeader(timeout time.Duration) error {
	for k, n := range p.nodes {
		if !n.IsLeader() {
			continue
		}
		if err := n.VerifyLeader(timeout); err != nil {
			if len(p.nodes) == 1 {
				return err
			}
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
