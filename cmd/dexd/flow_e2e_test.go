//go:build e2e

package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// modelCallTimes are the start times of the model calls the ledger has, by
// session.
func modelCallTimes(t *testing.T, ledger string) map[string][]time.Time {
	t.Helper()
	f, err := os.Open(ledger)
	if err != nil {
		return nil
	}
	defer f.Close()
	out := map[string][]time.Time{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e struct {
			Session, Kind, Time string
		}
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Kind != "model" {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, e.Time)
		if err != nil {
			t.Fatalf("ledger time %q: %v", e.Time, err)
		}
		out[e.Session] = append(out[e.Session], at)
	}
	for _, ts := range out {
		sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
	}
	return out
}

// With real processes: a model call answered 429 with a Retry-After holds
// its provider for every session, and the hold outlives the leader. The
// leader is SIGKILLed right after the 429; no model call of the provider
// starts before the Retry-After has passed, as the Worker's ledger shows,
// and the new leader's status shows the hold.
func TestProviderHoldSurvivesALeaderKill(t *testing.T) {
	const retryAfter = 8 * time.Second
	c := newTestCluster(t)
	c.extra = []string{"--agent-provider", "default=openai"}
	c.startAll(t)
	waitHealthy(t, c, 15*time.Second)
	dir := t.TempDir()
	script := map[string]any{"turns": []any{
		map[string]any{"match": "limited", "outputs": []any{
			map[string]any{"error": map[string]any{"type": "rate_limit", "message": "429 Too Many Requests", "retry_after_ms": retryAfter.Milliseconds()}},
			map[string]any{"text": "Done after the hold."},
		}},
	}, "default": []any{map[string]any{"text": "Hello."}}}
	path := writeScript(t, dir, script)
	ledger := filepath.Join(dir, "ledger.jsonl")
	runDexworker(t, c, dir, "--ledger", ledger, "--script", path, "--poll-wait", "2s")

	limited := startIn(t, strings.Join(c.grpc, ","), "--message", "limited")
	var first time.Time
	waitUntil(t, 30*time.Second, "the rate-limited model call in the ledger", func() (bool, string) {
		calls := modelCallTimes(t, ledger)[limited]
		if len(calls) == 0 {
			return false, "no model call yet"
		}
		first = calls[0]
		return true, ""
	})
	// The 429 is reported right after the call starts; wait for the hold.
	waitUntil(t, 10*time.Second, "the hold in the status", func() (bool, string) {
		out, err := dexctl(t, c.grpc, "status", "--json")
		return err == nil && strings.Contains(string(out), `"openai"`) && strings.Contains(string(out), `"until_ms"`), string(out)
	})
	leader, leaderID := c.leaderIndex(t)
	c.procs[leader].kill()
	other := startIn(t, strings.Join(c.others(leader), ","), "--message", "hello")

	alive := c.others(leader)
	waitUntil(t, 15*time.Second, "the new leader's status showing the hold", func() (bool, string) {
		out, err := dexctl(t, alive, "status", "--json")
		var st struct {
			Leader    string `json:"leader"`
			Providers []struct {
				Provider string `json:"provider"`
				Hold     *struct {
					UntilMs int64 `json:"until_ms"`
				} `json:"hold"`
			} `json:"providers"`
		}
		if err != nil || json.Unmarshal(out, &st) != nil {
			return false, string(out)
		}
		for _, p := range st.Providers {
			if p.Provider == "openai" && p.Hold != nil && st.Leader != leaderID {
				return true, ""
			}
		}
		return false, string(out)
	})
	for _, id := range []string{limited, other} {
		waitTurnDone(t, alive, id)
	}
	calls := modelCallTimes(t, ledger)
	if n := len(calls[limited]); n != 2 {
		t.Fatalf("the limited session made %d model calls; want the 429 and its retry", n)
	}
	holdEnds := first.Add(retryAfter)
	for _, id := range []string{limited, other} {
		for _, at := range calls[id] {
			if at.Equal(first) {
				continue
			}
			if at.Before(holdEnds) {
				t.Errorf("session %s called the provider at %s, %s before its Retry-After passed", id, at.Format(time.RFC3339Nano), holdEnds.Sub(at))
			}
		}
	}
}
