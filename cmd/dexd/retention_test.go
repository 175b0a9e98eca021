package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/dexhq/dex/lease/gc"
)

func TestEventRetentionFlags(t *testing.T) {
	base := []string{"--id", "n1", "--data-dir", t.TempDir(), "--raft-addr", "127.0.0.1:1",
		"--grpc-addr", "127.0.0.1:2", "--http-addr", "127.0.0.1:3", "--peers", "n1=127.0.0.1:1"}
	o, err := parse(base, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.eventCount != gc.DefaultEventCount || o.eventAge != gc.DefaultEventAge {
		t.Fatalf("defaults: %d events, %s", o.eventCount, o.eventAge)
	}
	o, err = parse(append(base, "--event-retention-count", "0", "--event-retention-age", "90m"), io.Discard)
	if err != nil || o.eventCount != 0 || o.eventAge != 90*time.Minute {
		t.Fatalf("parsed %v, %v", o, err)
	}
	_, err = parse(append(base, "--event-retention-age", "-1h"), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--event-retention-age must not be negative") {
		t.Fatalf("a negative age: %v", err)
	}
}

func TestSessionRetentionFlag(t *testing.T) {
	base := []string{"--id", "n1", "--data-dir", t.TempDir(), "--raft-addr", "127.0.0.1:1",
		"--grpc-addr", "127.0.0.1:2", "--http-addr", "127.0.0.1:3", "--peers", "n1=127.0.0.1:1"}
	o, err := parse(base, io.Discard)
	if err != nil || o.sessionRetention != 0 {
		t.Fatalf("default: %v, %v; want off", o, err)
	}
	o, err = parse(append(base, "--session-retention", "720h"), io.Discard)
	if err != nil || o.sessionRetention != 720*time.Hour {
		t.Fatalf("parsed %v, %v", o, err)
	}
	_, err = parse(append(base, "--session-retention", "-1s"), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--session-retention must not be negative") {
		t.Fatalf("a negative retention: %v", err)
	}
}
