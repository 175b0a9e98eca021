package metrics

import (
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

var voterHealthyDesc = prometheus.NewDesc("dex_raft_voter_healthy",
	"Each voter of the raft configuration as its leader sees it: 1 when it answers the leader's heartbeats (the leader counts itself), 0 from a failed heartbeat until one succeeds again. Only the leader reports it. The group keeps a quorum while more than half of its voters are healthy.",
	[]string{"voter"}, nil)

// VoterHealth is the leader's view of its voters: which answer its
// heartbeats. hashicorp/raft keeps each follower's last contact to itself;
// what it tells is each failed heartbeat and the first one that succeeds
// after failures, which VoterHealth follows through an observer.
type VoterHealth struct {
	raft *raft.Raft
	self raft.ServerID

	mu      sync.Mutex
	failing map[raft.ServerID]bool
}

// NewVoterHealth follows the heartbeats r sends while it leads; self is
// this node's server id. Make one per raft group: it reads r's
// observations until r shuts down.
func NewVoterHealth(r *raft.Raft, self string) *VoterHealth {
	v := &VoterHealth{raft: r, self: raft.ServerID(self), failing: map[raft.ServerID]bool{}}
	// Read at once by watch, so the buffer only takes bursts: a failing
	// peer adds one observation per failed heartbeat.
	ch := make(chan raft.Observation, 256)
	obs := raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.FailedHeartbeatObservation, raft.ResumedHeartbeatObservation, raft.LeaderObservation, raft.PeerObservation:
			return true
		}
		return false
	})
	r.RegisterObserver(obs)
	go v.watch(ch, obs)
	return v
}

// voterWatchShutdown is how often watch checks whether raft has shut down.
const voterWatchShutdown = time.Second

func (v *VoterHealth) watch(ch <-chan raft.Observation, obs *raft.Observer) {
	defer v.raft.DeregisterObserver(obs)
	tick := time.NewTicker(voterWatchShutdown)
	defer tick.Stop()
	for {
		select {
		case o := <-ch:
			v.observe(o)
		case <-tick.C:
			if v.raft.State() == raft.Shutdown {
				return
			}
		}
	}
}

// observe keeps the peers whose last heartbeat failed. A leadership change
// starts over: a new term's heartbeats start with no failure, and tell of a
// success only after failures of their own.
func (v *VoterHealth) observe(o raft.Observation) {
	v.mu.Lock()
	defer v.mu.Unlock()
	switch d := o.Data.(type) {
	case raft.FailedHeartbeatObservation:
		v.failing[d.PeerID] = true
	case raft.ResumedHeartbeatObservation:
		delete(v.failing, d.PeerID)
	case raft.LeaderObservation:
		clear(v.failing)
	case raft.PeerObservation:
		if d.Removed {
			delete(v.failing, d.Peer.ID)
		}
	}
}

func (v *VoterHealth) Describe(ch chan<- *prometheus.Desc) { ch <- voterHealthyDesc }

func (v *VoterHealth) Collect(ch chan<- prometheus.Metric) {
	if v.raft.State() != raft.Leader {
		return
	}
	f := v.raft.GetConfiguration()
	if f.Error() != nil {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, s := range f.Configuration().Servers {
		if s.Suffrage != raft.Voter {
			continue
		}
		healthy := 1.0
		if s.ID != v.self && v.failing[s.ID] {
			healthy = 0
		}
		ch <- prometheus.MustNewConstMetric(voterHealthyDesc, prometheus.GaugeValue, healthy, string(s.ID))
	}
}
