package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// every returns n dispatch times from start, step ms apart.
func every(n int, start, step float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = start + float64(i)*step
	}
	return out
}

func TestFairShare_KeysAlternating_IsFairAndIdeal(t *testing.T) {
	// One dispatch a ms from 10 ms, the keys taking turns while the small
	// one has Steps: small at 10, 12, …, 48; big at 11, 13, …, 49 then on.
	small := every(20, 10, 2)
	big := append(every(20, 11, 2), every(80, 50, 1)...)
	f := newFairShare(big, small, 100, 20)
	if f.Window != 40 || f.SmallInWindow != 20 || f.ShareOfFair != 1 || !f.GoalMet {
		t.Fatalf("window %d, small %d, share %v, met %v; want 40, 20, 1, met", f.Window, f.SmallInWindow, f.ShareOfFair, f.GoalMet)
	}
	if f.FirstMs != 10 || f.DispatchPerSec != 1000 {
		t.Errorf("first %v ms, %v dispatched/s; want 10 and 1000", f.FirstMs, f.DispatchPerSec)
	}
	if f.SmallDoneMs != 38 || f.IdealSmallDoneMs != 40 {
		t.Errorf("small done %v ms, ideal %v; want 38 and 40", f.SmallDoneMs, f.IdealSmallDoneMs)
	}
	if k := f.Keys[1]; k.Key != smallKey || k.Sessions != 20 || k.Missing != 0 || k.Dispatch.P50 != 28 || k.Dispatch.P99 != 48 {
		t.Errorf("small key %+v, dispatch %+v", k, k.Dispatch)
	}
}

func TestFairShare_SmallKeyBehindTheBacklog_MissesTheGoal(t *testing.T) {
	// FIFO: the big key's 100 first, then the small key's 20.
	f := newFairShare(every(100, 0, 1), every(20, 100, 1), 100, 20)
	if f.SmallInWindow != 0 || f.ShareOfFair != 0 || f.GoalMet {
		t.Errorf("small %d in window, share %v, met %v; want 0, 0, missed", f.SmallInWindow, f.ShareOfFair, f.GoalMet)
	}
	// A quarter of the window is half the fair share: the goal's edge.
	big := append(every(30, 0, 1), every(70, 40, 1)...)
	f = newFairShare(big, every(10, 30, 1), 100, 20)
	if f.SmallInWindow != 10 || f.ShareOfFair != 0.5 || !f.GoalMet {
		t.Errorf("small %d in window, share %v, met %v; want 10, 0.5, met", f.SmallInWindow, f.ShareOfFair, f.GoalMet)
	}
}

func TestFairShare_MissingAndEmpty(t *testing.T) {
	f := newFairShare([]float64{5, 6}, []float64{7}, 4, 2)
	if f.Keys[0].Missing != 2 || f.Keys[1].Missing != 1 || f.SmallInWindow != 1 || f.ShareOfFair != 0.5 {
		t.Errorf("keys %+v %+v, small in window %d, share %v", f.Keys[0], f.Keys[1], f.SmallInWindow, f.ShareOfFair)
	}
	if e := newFairShare(nil, nil, 10, 5); e.DispatchPerSec != 0 || e.SmallInWindow != 0 || e.GoalMet || e.Keys[1].Missing != 5 {
		t.Errorf("nothing dispatched: %+v", e)
	}
}

func TestAmongFirst_UnsortedInputAndTies(t *testing.T) {
	if got := amongFirst([]float64{9, 1, 5}, []float64{2, 3, 4}, 4); got != 1 {
		t.Errorf("among the first 4 of 1..5,9: %d of mine; want 1", got)
	}
	// A tie goes to the others: the small key is not flattered.
	if got := amongFirst([]float64{1, 2}, []float64{1, 2}, 1); got != 0 {
		t.Errorf("a tie for the first: %d of mine; want 0", got)
	}
	if got := amongFirst([]float64{1, 2}, nil, 10); got != 2 {
		t.Errorf("window past the end: %d; want 2", got)
	}
}

func TestUrgentAfter_SpreadOverTheFirstFifthsOfTheBacklog(t *testing.T) {
	if got := []int{urgentAfter(0, 50, 2000), urgentAfter(1, 50, 2000), urgentAfter(49, 50, 2000)}; got[0] != 32 || got[1] != 64 || got[2] != 1600 {
		t.Errorf("thresholds %v; want 32, 64, 1600", got)
	}
	// The first waits for one dispatch at least: the Workers are polling.
	if got := urgentAfter(0, 10, 10); got != 1 {
		t.Errorf("first of 10 over a backlog of 10: %d; want 1", got)
	}
}

func TestBacklogLeft_CountsLaterAndNeverDispatched(t *testing.T) {
	if got := backlogLeft([]float64{1, 2, 3, 10, 11}, 7, 3); got != 4 {
		t.Errorf("backlog left = %d; want 4 (two later, two never)", got)
	}
}

func TestFlowShape_RoundRobinKeysEveryPriority(t *testing.T) {
	if flowShape(0, true) != nil {
		t.Fatal("no keys: want no shape")
	}
	keysOnly := &dexv1.CreateSessionRequest{}
	flowShape(3, false)(7, keysOnly)
	if keysOnly.FairnessKey != "key-1" || keysOnly.Priority != 0 {
		t.Fatalf("keys without --priorities: %+v; want key-1 and no priority", keysOnly)
	}
	shape := flowShape(3, true)
	seen := map[string]map[uint32]bool{}
	for i := range 15 {
		req := &dexv1.CreateSessionRequest{}
		shape(i, req)
		if req.FairnessWeight != 1 || req.Priority < 1 || req.Priority > 5 {
			t.Fatalf("session %d: %+v", i, req)
		}
		if seen[req.FairnessKey] == nil {
			seen[req.FairnessKey] = map[uint32]bool{}
		}
		seen[req.FairnessKey][req.Priority] = true
	}
	if len(seen) != 3 {
		t.Fatalf("keys %v; want 3", seen)
	}
	for k, p := range seen {
		if len(p) != 5 {
			t.Errorf("key %s has priorities %v over 15 sessions; want all 5", k, p)
		}
	}
}

func TestDispatchLog_FirstHeldCountsOnceAndWakesTheWaiter(t *testing.T) {
	d := newDispatchLog()
	t0 := time.Now()
	d.held("backlog-000000")
	first, _ := d.get("backlog-000000")
	d.held("backlog-000000") // a second attempt: not a new dispatch
	if at, _ := d.get("backlog-000000"); !at.Equal(first) {
		t.Errorf("a second attempt moved the first dispatch")
	}
	done := make(chan error, 1)
	go func() { done <- d.waitFor(context.Background(), backlogPrefix, 2) }()
	d.held("urgent-000000")
	d.held("backlog-000001")
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waitFor did not return after the second backlog session")
	}
	if got := d.since(t0, idRange{prefix: backlogPrefix, n: 3}); len(got) != 2 || got[0] < 0 {
		t.Errorf("since = %v; want two times from t0", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := d.waitFor(ctx, backlogPrefix, 3); err == nil {
		t.Error("waitFor on a cancelled context returned nil")
	}
}

func TestFairnessCheck_RefusesWhatCannotRun(t *testing.T) {
	ok := fairnessOptions{on: true, big: 1000, small: 20, backlog: 300, urgent: 10}
	if err := ok.check(options{runs: 1}); err != nil {
		t.Fatalf("valid flags refused: %v", err)
	}
	for name, c := range map[string]struct {
		f fairnessOptions
		o options
	}{
		"small above big":     {fairnessOptions{on: true, big: 10, small: 20, backlog: 300, urgent: 10}, options{runs: 1}},
		"urgent over backlog": {fairnessOptions{on: true, big: 1000, small: 20, backlog: 5, urgent: 10}, options{runs: 1}},
		"big over ids":        {fairnessOptions{on: true, big: maxIndex + 1, small: 20}, options{runs: 1}},
		"runs":                {ok, options{runs: 3}},
		"keys":                {ok, options{runs: 1, fairnessKeys: 4}},
	} {
		if err := c.f.check(c.o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := (fairnessOptions{}).check(options{runs: 3, fairnessKeys: 4}); err != nil {
		t.Errorf("--fairness off: %v", err)
	}
}

func TestFairnessReport_TableAndJSON(t *testing.T) {
	r := &fairnessReport{Bench: "fairness", Config: fairnessConfig{Big: 100, Small: 20, Backlog: 300, Urgent: 2, Nodes: 3, Partitions: 1},
		Fair: newFairShare(every(100, 0, 1), every(20, 100, 1), 100, 20),
		Priority: &priorityLoad{Backlog: 300, Urgent: 2, CreateToHeld: newDist([]float64{12, 61}), BacklogLeft: 40,
			BacklogDispatch: newDist(every(300, 1, 1))}}
	var text bytes.Buffer
	r.writeTable(&text)
	for _, want := range []string{"0 of the first 40 dispatches (fair: 20; goal ≥ 0.5: missed)", "61.0 ms", "goal < 50 ms: missed", `key "small": Workers' start → task held`} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, text.String())
		}
	}
	var js bytes.Buffer
	writeJSON(&js, r)
	var back struct {
		Fair struct {
			Share float64 `json:"small_share_of_fair"`
			Keys  []struct {
				Dispatch struct {
					P99 float64 `json:"p99_ms"`
				} `json:"dispatch_ms"`
			} `json:"keys"`
		} `json:"fair_share"`
		Priority struct {
			Left int `json:"backlog_left_at_last_urgent"`
		} `json:"priority"`
	}
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Fair.Share != 0 || len(back.Fair.Keys) != 2 || back.Fair.Keys[1].Dispatch.P99 != 119 || back.Priority.Left != 40 {
		t.Errorf("JSON read back %+v", back)
	}
}
