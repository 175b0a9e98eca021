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
// when its result or failure is applied, and gives its hubs the state, for
// a watch that resumes an attempt which ended before it came back.
type Service struct {
	src    StateSource
	limits Limits
	hub    atomic.Pointer[Hub]
}

// NewService returns the service, not leading.
func NewService(src StateSource, l Limits) *Service { return &Service{src: src, limits: l} }

// EstablishLeadership opens the term's hub.
func (s *Service) EstablishLeadership(context.Context, uint64) error {
	h := NewHub(s.limits)
	h.src = s.src
	if old := s.hub.Swap(h); old != nil {
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
		h.End(step.GetSessionId(), Key{Step: k.Step, Attempt: k.N}, endKind(step, k.N) == Abandoned)
	}
}

// endKind is how an ended attempt's output ends: Ended when the attempt
// succeeded, Abandoned otherwise (a Step or attempt the state does not hold
// included). A watch that resumes after the end reads it by the same rule.
func endKind(step *fsmpb.Step, n uint32) Kind {
	if step != nil && n != 0 && int(n) <= len(step.Attempts) && step.Attempts[n-1].Status == fsmpb.AttemptStatus_ATTEMPT_STATUS_SUCCEEDED {
		return Ended
	}
	return Abandoned
}
