package cluster

import "time"

// Raft timing. A takeover starts when followers notice the leader is gone,
// so these set the floor of every takeover; each default says why it is safe.
const (
	// DefaultHeartbeatTimeout: a follower that hears nothing from the leader
	// for a random time between this and twice this starts a (pre-)vote, so a
	// dead leader is noticed 0.5–1 s after its last contact. The leader sends
	// a heartbeat every tenth of it (50 ms) on a connection of its own that
	// no disk write or apply blocks, so a false election needs ten heartbeats
	// in a row lost or late: a pause of the leader's whole process, which the
	// dispatch epoch fences anyway.
	DefaultHeartbeatTimeout = 500 * time.Millisecond
	// DefaultElectionTimeout: how long a candidate waits for votes before it
	// tries again (a split vote). Loopback and LAN round trips are far below.
	DefaultElectionTimeout = 500 * time.Millisecond
	// DefaultLeaderLeaseTimeout: a leader that has not reached a quorum for
	// this long steps down, so a partitioned leader stops serving before the
	// others elect a new one. Raft requires it to be at most the heartbeat
	// timeout.
	DefaultLeaderLeaseTimeout = 500 * time.Millisecond
)
