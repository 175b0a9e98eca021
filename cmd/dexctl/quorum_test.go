package main

import (
	"strings"
	"testing"
	"time"
)

// With one voter of three answering no leader can be elected: session
// commands say so at once rather than wait out --wait for a takeover.
func TestSessionCommandsSayWhenQuorumIsLost(t *testing.T) {
	f := &fakeSessions{notLeader: "node n1 is not the leader; no leader is known yet"}
	a := &fakeAdmin{status: threeNodes("", "candidate", "unreachable", "unreachable"), notLeader: f.notLeader}
	addrs := strings.Join([]string{startFakeNode(t, f, a, false), deadAddr(t), deadAddr(t)}, ",")
	for _, args := range [][]string{
		{"--addr", addrs, "--wait", "10m", "session", "start", "--message", "hello"},
		{"--addr", addrs, "--wait", "10m", "session", "send", "s1", "hello"},
		{"--addr", addrs, "node", "transfer-leadership"},
	} {
		start := time.Now()
		done := make(chan error, 1)
		go func() { _, err := run(t, args...); done <- err }()
		var err error
		select {
		case err = <-done:
		case <-time.After(time.Minute):
			t.Fatalf("dexctl %s still waiting for a leader after a minute with no quorum", strings.Join(args[2:], " "))
		}
		t.Logf("dexctl %s failed after %s: %v", strings.Join(args[2:], " "), time.Since(start).Round(time.Millisecond), err)
		if err == nil || !strings.Contains(err.Error(), "1 of 3 voters reachable: no quorum (n2, n3 not answering)") {
			t.Errorf("dexctl %s: %v; want it to say 1 of 3 voters reachable: no quorum", strings.Join(args[2:], " "), err)
		}
	}
}

// A majority answering but no leader yet is an election: session commands
// keep looking until --wait ends, as through a takeover.
func TestSessionCommandsWaitThroughAnElection(t *testing.T) {
	f := &fakeSessions{notLeader: "node n1 is not the leader; no leader is known yet"}
	a := &fakeAdmin{status: threeNodes("", "candidate", "follower", "unreachable")}
	addr := startFakeNode(t, f, a, false)
	_, err := run(t, "--addr", addr, "--wait", "1500ms", "session", "start", "--message", "hello")
	if err == nil || !strings.Contains(err.Error(), "no Dex node serving clients answered") || strings.Contains(err.Error(), "no quorum") {
		t.Fatalf("with 2 of 3 voters answering: %v; want the end of --wait, not a lost quorum", err)
	}
}
