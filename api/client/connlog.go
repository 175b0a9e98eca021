package client

import (
	"sync"
	"time"

	"go.uber.org/zap"
)

// connLog logs, at info, when a Worker's polls stop reaching the cluster and
// when they reach it again, once each, so a takeover leaves a trace in the
// Worker's log without a line per failed try.
type connLog struct {
	mu     sync.Mutex
	lostAt time.Time // zero while connected
}

// lost records a poll that did not reach the cluster.
func (c *connLog) lost(log *zap.Logger, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.lostAt.IsZero() {
		log.Debug("poll: cluster still not reachable", zap.Error(err))
		return
	}
	c.lostAt = time.Now()
	log.Info("lost the connection to the cluster; reconnecting", zap.Error(err))
}

// reached records a poll that the cluster answered.
func (c *connLog) reached(log *zap.Logger) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lostAt.IsZero() {
		return
	}
	log.Info("reconnected to the cluster", zap.Duration("after", time.Since(c.lostAt).Round(time.Millisecond)))
	c.lostAt = time.Time{}
}
