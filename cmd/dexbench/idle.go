package main

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// idlePrefix names the sessions of the idle load; their model answers the
// first message with text, so each is one RunModel Step.
const idlePrefix = "idle"

func isIdleLoad(sessionID string) bool { return strings.HasPrefix(sessionID, idlePrefix+"-") }

// idleLoad is what loading the idle sessions took.
type idleLoad struct {
	Sessions int     `json:"sessions"`
	Batch    int     `json:"batch"`
	Seconds  float64 `json:"seconds"`
	// Entries the leader committed during the load.
	Entries        float64 `json:"entries"`
	SessionsPerSec float64 `json:"sessions_per_sec"`
}

// loadIdle creates n one-turn sessions, batch at a time, each driven to idle
// by the Workers before the next batch starts, so the state holds n idle
// sessions beside the measured ones; shape (nil: none) shapes each.
func loadIdle(ctx context.Context, cl *client.Client, svc dexv1.SessionServiceClient, fin *finishes, n, batch int, timeout time.Duration, raftIndex func() float64, shape sessionShape) (*idleLoad, error) {
	load := &idleLoad{Sessions: n, Batch: batch}
	i0, t0 := raftIndex(), time.Now()
	for from := 0; from < n; from += batch {
		bctx, cancel := context.WithTimeout(ctx, timeout)
		_, _, _, err := drive(bctx, cl, svc, fin, idRange{prefix: idlePrefix, from: from, n: min(batch, n-from)}, shape)
		cancel()
		if err != nil {
			return load, fmt.Errorf("idle load, batch from %s: %w", sessionID(idlePrefix, from), err)
		}
	}
	wall := time.Since(t0).Seconds()
	load.Seconds = math.Round(wall*100) / 100
	load.Entries = raftIndex() - i0
	if wall > 0 {
		load.SessionsPerSec = math.Round(float64(n)/wall*10) / 10
	}
	return load, nil
}

// idleModel answers an idle-load session's message with text alone.
func idleModel(in client.ModelInput) (*dexv1.ModelOutput, bool) {
	if !isIdleLoad(in.SessionID) {
		return nil, false
	}
	return &dexv1.ModelOutput{Text: "hi"}, true
}
