package lease_test

import (
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/dexhq/dex/lease"
)

// The grace covers what a Go-library Worker needs to reach a new leader
// (notice 1.5 s + one lost try + a heartbeat interval), twice, and never
// falls under the steady-state heartbeat timeout.
func TestTakeoverGraceIsDerivedFromWorkerTiming(t *testing.T) {
	for _, c := range []struct {
		interval, timeout, want time.Duration
	}{
		{2 * time.Second, 10 * time.Second, 11 * time.Second},      // dexd's defaults
		{500 * time.Millisecond, 3 * time.Second, 6 * time.Second}, // the chaos suite's flags
		{500 * time.Millisecond, 30 * time.Second, 30 * time.Second},
		{10 * time.Second, 30 * time.Second, 30 * time.Second},
		{10 * time.Second, 10 * time.Second, 27 * time.Second},
	} {
		if got := lease.TakeoverGrace(c.interval, c.timeout); got != c.want {
			t.Errorf("TakeoverGrace(%s, %s) = %s; want %s", c.interval, c.timeout, got, c.want)
		}
	}
}

func TestManagerUsesTheDerivedGraceUnlessSet(t *testing.T) {
	m := lease.NewDeadlines(nil, nil, lease.DeadlinesConfig{HeartbeatTimeout: 3 * time.Second, HeartbeatInterval: 500 * time.Millisecond}, zap.NewNop())
	if got := m.TakeoverGrace(); got != 6*time.Second {
		t.Fatalf("grace %s; want the derived 6s", got)
	}
	if got := m.HeartbeatTimeout(); got != 3*time.Second {
		t.Fatalf("heartbeat timeout %s; want 3s unchanged", got)
	}
	m = lease.NewDeadlines(nil, nil, lease.DeadlinesConfig{HeartbeatTimeout: 3 * time.Second, TakeoverGrace: time.Second}, zap.NewNop())
	if got := m.TakeoverGrace(); got != time.Second {
		t.Fatalf("grace %s; want the configured 1s", got)
	}
}
