package main

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

func TestLogTimestampsAreISO8601(t *testing.T) {
	var buf bytes.Buffer
	log := newLogger(&buf)
	log.Info("dexworker starting")
	log.Debug("not shown")
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("%v: %s", err, buf.String())
	}
	ts, ok := line["ts"].(string)
	if !ok {
		t.Fatalf("ts = %#v; want an ISO-8601 string", line["ts"])
	}
	if _, err := time.Parse("2006-01-02T15:04:05.000Z0700", ts); err != nil {
		t.Fatalf("ts %q: %v", ts, err)
	}
}
