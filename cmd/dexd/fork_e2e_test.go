//go:build e2e

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// forkShown is what dexctl session show --json says of a session's status,
// link and history.
type forkShown struct {
	Status      string `json:"status"`
	ForkedFrom  string `json:"forked_from"`
	ForkedAtSeq uint64 `json:"forked_at_seq"`
	History     []struct {
		Seq    uint64 `json:"seq"`
		Kind   string `json:"kind"`
		Text   string `json:"text"`
		CallID string `json:"call_id"`
	} `json:"history"`
}

func showFork(t *testing.T, addrs []string, id string) (*forkShown, error) {
	out, err := dexctl(t, addrs, "session", "show", id, "--json")
	if err != nil {
		return nil, fmt.Errorf("%s", stderrOf(err))
	}
	var s forkShown
	return &s, json.Unmarshal(out, &s)
}

func waitIdle(t *testing.T, addrs []string, id string) *forkShown {
	t.Helper()
	var got *forkShown
	waitUntil(t, 60*time.Second, "session "+id+" idle", func() (bool, string) {
		s, err := showFork(t, addrs, id)
		if err != nil {
			return false, err.Error()
		}
		got = s
		return s.Status == "idle", s.Status
	})
	return got
}

// forkLedgerLine is what this test reads of a line of dexworker's ledger.
type forkLedgerLine struct {
	Session string `json:"session"`
	Tool    string `json:"tool"`
	CallID  string `json:"call_id"`
}

func ledgerLines(t *testing.T, ledger, session string) []forkLedgerLine {
	t.Helper()
	f, err := os.Open(ledger)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []forkLedgerLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e forkLedgerLine
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("ledger line %q: %v", sc.Text(), err)
		}
		if e.Session == session {
			out = append(out, e)
		}
	}
	return out
}

// With real processes: a session of 200 entries, two turns of a message, a
// model call asking for 97 lookups, their 97 results and an answer, is
// forked at entry 100 (the end of the first turn) with a message. The fork
// holds the source's first 100 entries as recorded, and the demo Worker's
// ledger shows that only the fork's new turn ran: its model calls and the
// one lookup it asked for, whose call id the scripted model draws from the
// last seq it was sent (101: the 100 copied entries and the fork's
// message). The source's ledger lines do not grow.
func TestForkRunsOnlyTheNewTurnWithRealProcesses(t *testing.T) {
	const perTurn = 97 // lookups: a turn of 100 entries
	c := newTestCluster(t)
	c.startAll(t)
	waitHealthy(t, c, 15*time.Second)
	dir := t.TempDir()
	var turns []any
	for i := 1; i <= 2; i++ {
		var calls []any
		for j := 1; j <= perTurn; j++ {
			calls = append(calls, map[string]any{"tool": "lookup", "arguments": map[string]any{"q": fmt.Sprintf("%d.%d", i, j)}})
		}
		turns = append(turns, map[string]any{"match": fmt.Sprintf("q%d", i), "outputs": []any{
			map[string]any{"tool_calls": calls},
			map[string]any{"text": fmt.Sprintf("answer %d", i)},
		}})
	}
	turns = append(turns, map[string]any{"match": "branch", "outputs": []any{
		map[string]any{"tool_calls": []any{map[string]any{"tool": "lookup", "arguments": map[string]any{"q": "branch"}}}},
		map[string]any{"text": "branched"},
	}})
	path := writeScript(t, dir, map[string]any{"turns": turns})
	ledger := filepath.Join(dir, "ledger.jsonl")
	runDexworker(t, c, dir, "--ledger", ledger, "--script", path, "--poll-wait", "2s", "--concurrency", "16")

	src := startIn(t, strings.Join(c.grpc, ","), "--message", "q1")
	waitIdle(t, c.grpc, src)
	if _, err := dexctl(t, c.grpc, "session", "send", src, "q2"); err != nil {
		t.Fatalf("send q2: %s", stderrOf(err))
	}
	source := waitIdle(t, c.grpc, src)
	if len(source.History) != 200 {
		t.Fatalf("the source has %d entries; want 200", len(source.History))
	}
	before := ledgerLines(t, ledger, src)
	if len(before) != 2*(2+perTurn) { // each turn's 2 model calls and its lookups
		t.Fatalf("the source's ledger has %d lines; want %d", len(before), 2*(2+perTurn))
	}

	// A seq the source does not hold is refused and creates nothing.
	if out, err := dexctl(t, c.grpc, "session", "fork", src, "--at", "999"); err == nil || !strings.Contains(stderrOf(err), "has no history entry 999") {
		t.Fatalf("fork at 999: %s %v", out, stderrOf(err))
	}
	out, err := dexctl(t, c.grpc, "session", "fork", src, "--at", "100", "--message", "branch", "--json")
	if err != nil {
		t.Fatalf("fork: %s", stderrOf(err))
	}
	var forked struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(out, &forked); err != nil || forked.ID == "" {
		t.Fatalf("fork answered %s (%v)", out, err)
	}
	fork := waitIdle(t, c.grpc, forked.ID)
	if fork.ForkedFrom != src || fork.ForkedAtSeq != 100 {
		t.Fatalf("the fork names %q at %d", fork.ForkedFrom, fork.ForkedAtSeq)
	}
	if len(fork.History) != 104 {
		t.Fatalf("the fork has %d entries; want the 100 copied, its message, and its turn's 3", len(fork.History))
	}
	for i := range 100 {
		if fork.History[i] != source.History[i] {
			t.Fatalf("entry %d of the fork is %+v; the source's is %+v", i+1, fork.History[i], source.History[i])
		}
	}
	if m := fork.History[100]; m.Seq != 101 || m.Kind != "user" || m.Text != "branch" {
		t.Fatalf("the fork's message is %+v", m)
	}
	if last := fork.History[103]; last.Text != "branched" {
		t.Fatalf("the fork's last entry is %+v", last)
	}

	lines := ledgerLines(t, ledger, forked.ID)
	models, lookups := 0, 0
	for _, l := range lines {
		switch l.Tool {
		case "model":
			models++
		case "lookup":
			lookups++
			if l.CallID != "call-101-1" {
				t.Errorf("the fork's lookup has call id %q; want call-101-1 (the model was sent entries up to 101)", l.CallID)
			}
		default:
			t.Errorf("the fork ran %q", l.Tool)
		}
	}
	if models != 2 || lookups != 1 {
		t.Fatalf("the fork's ledger has %d model calls and %d lookups; want the new turn's 2 and 1: %v", models, lookups, lines)
	}
	if after := ledgerLines(t, ledger, src); len(after) != len(before) {
		t.Fatalf("the source's ledger went from %d lines to %d", len(before), len(after))
	}
	// The source lists its fork.
	if out, err := dexctl(t, c.grpc, "session", "list", "--forked-from", src, "--json"); err != nil || !strings.Contains(string(out), forked.ID) {
		t.Fatalf("list --forked-from: %s %v", out, stderrOf(err))
	}
}
