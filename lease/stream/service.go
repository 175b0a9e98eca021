package stream

import (
	"context"
	"sync/atomic"

	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// StateSource gives the replicated state as this node applied it.
type StateSource interface {
	State() *fsm.State
}

// Service is the leader's hub as a leader-only service: a new hub for each
// term (a new leader holds nothing and asks Workers to resend), closed when
// the term ends. It reads the applied stream to end an attempt's output
// when its result or failure is applied.
type Service struct {
	src    StateSource
	limits Limits
	hub    atomic.Pointer[Hub]
}

// NewService returns the service, not leading.
func NewService(src StateSource, l Limits) *Service { return &Service{src: src, limits: l} }

// EstablishLeadership opens the term's hub.
func (s *Service) EstablishLeadership(context.Context, uint64) error {
	if old := s.hub.Swap(NewHub(s.limits)); old != nil {
		old.Close()
	}
	return nil
}

// RevokeLeadership closes the term's hub: its watchers' streams end.
func (s *Service) RevokeLeadership() {
	if old := s.hub.Swap(nil); old != nil {
		old.Close()
	}
}

// Hub is the term's hub (nil when this node does not lead).
func (s *Service) Hub() *Hub { return s.hub.Load() }

// Applied ends the output of each attempt the entry ended: whole when it
// succeeded, abandoned otherwise.
func (s *Service) Applied(a *fsm.Applied) {
	h := s.hub.Load()
	if h == nil || a == nil || len(a.Ended) == 0 {
		return
	}
	st := s.src.State()
	for _, k := range a.Ended {
		step := st.Step(k.Step)
		if step == nil || k.N == 0 || int(k.N) > len(step.Attempts) {
			h.End(step.GetSessionId(), Key{Step: k.Step, Attempt: k.N}, true)
			continue
		}
		ok := step.Attempts[k.N-1].Status == fsmpb.AttemptStatus_ATTEMPT_STATUS_SUCCEEDED
		h.End(step.SessionId, Key{Step: k.Step, Attempt: k.N}, !ok)
	}
}
