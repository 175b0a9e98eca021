package main

import (
	"io"
	"strings"
	"testing"
	"time"
)

// A queued Step waits for its Worker by default; --tool-wait makes it fail
// after a while, opt-in.
func TestToolWaitFlag(t *testing.T) {
	base := []string{"--id", "n1", "--data-dir", t.TempDir(), "--raft-addr", "127.0.0.1:1",
		"--grpc-addr", "127.0.0.1:2", "--http-addr", "127.0.0.1:3", "--peers", "n1=127.0.0.1:1"}
	o, err := parse(base, io.Discard)
	if err != nil || o.toolWait != 0 {
		t.Fatalf("default: %v, %v; want 0 (wait for ever)", o, err)
	}
	o, err = parse(append(base, "--tool-wait", "5m"), io.Discard)
	if err != nil || o.toolWait != 5*time.Minute {
		t.Fatalf("parsed %v, %v", o, err)
	}
	o, err = parse(append(base, "--tool-wait", "0"), io.Discard)
	if err != nil || o.toolWait != 0 {
		t.Fatalf("parsed %v, %v", o, err)
	}
	_, err = parse(append(base, "--tool-wait", "-1s"), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--tool-wait must not be negative") {
		t.Fatalf("a negative tool wait: %v", err)
	}
}
