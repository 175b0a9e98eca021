package metrics

import "context"

// Leadership counts takeovers. Register it as the last leader service, so
// it counts a leadership whose services all started.
func (m *Node) Leadership() *Leadership { return &Leadership{m: m} }

// Leadership is a cluster.LeaderService that counts takeovers.
type Leadership struct{ m *Node }

func (l *Leadership) EstablishLeadership(context.Context, uint64) error {
	l.m.takeovers.Inc()
	return nil
}

func (l *Leadership) RevokeLeadership() {}
