package cluster

import "time"

// Raft timing. A takeover starts when followers notice the leader is gone,
// so these set the floor of every takeover; each default says why it is safe.
const (
	// DefaultHeartbeatTimeout: a follower that hears nothing from the leader
	// for a random time between this and twice this starts a pre-vote. With
	// pre-vote on, the survivor that times out first is refused by the other
	// (which still counts the dead leader as its leader) and the second one
	// wins, so a dead leader is replaced 0.3–0.6 s after its last contact
	// (measured by make takeover). The leader sends a heartbeat every tenth
	// of it (30 ms) on a connection of its own that no disk write or apply
	// blocks, so a false election needs ten heartbeats in a row lost or late:
	// a stall of the leader's whole process, which the dispatch epoch fences
	// anyway. dexbench --steady counts the elections under load (none in
	// BENCHMARKS.md's ten-minute run).
	DefaultHeartbeatTimeout = 300 * time.Millisecond
	// DefaultElectionTimeout: how long a candidate waits for votes before it
	// tries again (a split vote, a refused pre-vote). Loopback and LAN round
	// trips are far below it.
	DefaultElectionTimeout = 300 * time.Millisecond
	// DefaultStepDownTimeout (raft's LeaderLeaseTimeout, dexd
	// --raft-leader-lease-timeout): a leader that has not reached a quorum for
	// this long steps down, so a partitioned leader stops serving before the
	// others elect a new one. Raft requires it to be at most the heartbeat
	// timeout.
	DefaultStepDownTimeout = 300 * time.Millisecond
)
