package lease

import (
	"context"
	"fmt"
	"sync"

	"go.uber.org/zap"

	"github.com/dexhq/dex/fsm"
)

// Service is a leader-only service as the runtime starts and stops it.
// EstablishLeadership runs once this node leads with a fresh epoch (the
// barrier ran, the epoch is opened); RevokeLeadership stops it, and nothing
// of it proposes after it returns.
type Service interface {
	EstablishLeadership(ctx context.Context, epoch uint64) error
	RevokeLeadership()
}

// Drainer is a Service that stops taking new work on a leader about to hand
// over, while what already runs may still report to it.
type Drainer interface {
	Drain()
}

// AppliedReader is a Service that reads the applied stream: every entry the
// state machine applied, in log order, on the state machine's goroutine. It
// must be quick and must not wait for an apply.
type AppliedReader interface {
	Applied(*fsm.Applied)
}

// Runtime is the leader's runtime: it starts every leader-only service in
// the one order it was given, stops them in the reverse order, drains them
// for a planned step-down, and hands the applied stream to those that read
// it. The cluster's leadership loop drives it (it is a cluster
// LeaderService); cmd/dexd gives it its services.
type Runtime struct {
	services []Service
	readers  []AppliedReader
	log      *zap.Logger

	mu          sync.Mutex // establish, revoke and drain do not overlap
	established bool
}

// NewRuntime returns a runtime over services, in the order they start.
func NewRuntime(log *zap.Logger, services ...Service) *Runtime {
	if log == nil {
		log = zap.NewNop()
	}
	r := &Runtime{services: services, log: log.Named("leader")}
	for _, s := range services {
		if a, ok := s.(AppliedReader); ok {
			r.readers = append(r.readers, a)
		}
	}
	return r
}

// EstablishLeadership starts the services in order for epoch. It revokes
// an earlier establishment first. When one fails, those started (and the
// one that failed) are revoked in reverse order and the error returned: the
// cluster retries.
func (r *Runtime) EstablishLeadership(ctx context.Context, epoch uint64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.revokeLocked()
	for i, s := range r.services {
		if err := s.EstablishLeadership(ctx, epoch); err != nil {
			for j := i; j >= 0; j-- {
				r.services[j].RevokeLeadership()
			}
			return fmt.Errorf("start leader service %T: %w", s, err)
		}
	}
	r.established = true
	r.log.Info("dispatch lease established", zap.Uint64("epoch", epoch), zap.Int("services", len(r.services)))
	return nil
}

// RevokeLeadership stops the services in reverse order.
func (r *Runtime) RevokeLeadership() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.revokeLocked()
}

func (r *Runtime) revokeLocked() {
	if !r.established {
		return
	}
	r.established = false
	for i := len(r.services) - 1; i >= 0; i-- {
		r.services[i].RevokeLeadership()
	}
	r.log.Info("dispatch lease revoked")
}

// Drain is the first half of a planned step-down: the services that are
// Drainers stop taking new work, in reverse order (dispatch stops handing
// out tasks before the attempt deadlines are dropped). The others keep
// running until RevokeLeadership.
func (r *Runtime) Drain() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.services) - 1; i >= 0; i-- {
		if d, ok := r.services[i].(Drainer); ok {
			d.Drain()
		}
	}
	r.log.Info("draining: leader services take no new work")
}

// Applied hands one applied entry to every service that reads the stream.
// It is the state machine's one applied stream (cluster Config.OnApplied).
func (r *Runtime) Applied(a *fsm.Applied) {
	for _, s := range r.readers {
		s.Applied(a)
	}
}
