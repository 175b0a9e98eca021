package main

import (
	"strings"
	"testing"
	"time"
)

// With nothing listening at any address, session commands fail at once (as
// status does) instead of waiting out --wait for a takeover.
func TestSessionCommandsFailFastWhenNothingListens(t *testing.T) {
	a, b := deadAddr(t), deadAddr(t)
	for _, args := range [][]string{
		{"--addr", a + "," + b, "--wait", "10m", "session", "list"},
		{"--addr", a + "," + b, "--wait", "10m", "session", "show", "s1"},
	} {
		done := make(chan error, 1)
		go func() { _, err := run(t, args...); done <- err }()
		var err error
		select {
		case err = <-done:
		case <-time.After(time.Minute):
			t.Fatalf("dexctl %s still waiting for a node after a minute", strings.Join(args, " "))
		}
		if err == nil || !strings.Contains(err.Error(), "no node is reachable") || !strings.Contains(err.Error(), a) || !strings.Contains(err.Error(), b) {
			t.Errorf("dexctl %s: %v; want it to say no node is reachable, naming %s and %s", strings.Join(args, " "), err, a, b)
		}
	}
}
