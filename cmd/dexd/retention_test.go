package main

import (
	"errors"
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

func TestRetentionFlags(t *testing.T) {
	base := []string{"--id", "n1", "--data-dir", t.TempDir(), "--raft-addr", "127.0.0.1:1",
		"--grpc-addr", "127.0.0.1:2", "--http-addr", "127.0.0.1:3", "--peers", "n1=127.0.0.1:1"}
	o, err := parse(base, io.Discard)
	if err != nil || o.retention != 0 || len(o.agentRetention) != 0 {
		t.Fatalf("default: %v, %v; want closed sessions kept for ever", o, err)
	}
	o, err = parse(append(base, "--retention", "168h", "--agent-retention", "support=720h,default=1h", "--agent-retention", "bot@2=0"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.retention != 168*time.Hour || len(o.agentRetention) != 3 || o.agentRetention["support"] != 720*time.Hour ||
		o.agentRetention[""] != time.Hour || o.agentRetention["bot@2"] != 0 {
		t.Fatalf("parsed --retention %s, --agent-retention %v", o.retention, o.agentRetention)
	}
	if got := o.agentRetention.String(); got != "bot@2=0s,default=1h0m0s,support=720h0m0s" {
		t.Fatalf("shown as %q", got)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--retention", "-1s"}, "--retention must not be negative (0: closed sessions are kept for ever)"},
		{[]string{"--retention", "1000000h"}, "--retention is at most 100 years"},
		{[]string{"--agent-retention", "bot"}, `"bot" is not NAME=DURATION`},
		{[]string{"--agent-retention", "=1h"}, `"=1h" is not NAME=DURATION`},
		{[]string{"--agent-retention", "bot=soon"}, `agent bot: "soon" is not a duration`},
		{[]string{"--agent-retention", "bot=-1h"}, "agent bot: the retention must not be negative"},
		{[]string{"--agent-retention", "bot=1h,bot=2h"}, "agent bot is given twice"},
		{[]string{"--agent-retention", "b/ad=1h"}, `agent "b/ad"`},
		{[]string{"--agent-retention", "bot=1000000h"}, "--agent-retention: agent bot: at most 100 years"},
	} {
		_, err := parse(append(base, tc.args...), io.Discard)
		var ue *usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v; want a usage error saying %q", tc.args, err, tc.want)
		}
	}
}

func TestKeepTurnStepsFlag(t *testing.T) {
	base := []string{"--id", "n1", "--data-dir", t.TempDir(), "--raft-addr", "127.0.0.1:1",
		"--grpc-addr", "127.0.0.1:2", "--http-addr", "127.0.0.1:3", "--peers", "n1=127.0.0.1:1"}
	o, err := parse(base, io.Discard)
	if err != nil || o.keepTurnSteps != gc.DefaultKeepTurnSteps {
		t.Fatalf("default: %v, %v; want %d", o, err, gc.DefaultKeepTurnSteps)
	}
	o, err = parse(append(base, "--keep-turn-steps", "0"), io.Discard)
	if err != nil || o.keepTurnSteps != 0 {
		t.Fatalf("--keep-turn-steps 0: %v, %v", o, err)
	}
	_, err = parse(append(base, "--keep-turn-steps", "-1"), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "keep-turn-steps") {
		t.Fatalf("a negative count: %v", err)
	}
}
