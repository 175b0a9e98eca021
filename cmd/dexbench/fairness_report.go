package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"text/tabwriter"
)

// The --fairness figures (fair share, priority) and how they are printed.

// fairShare is the fair share phase: two keys of weight 1, the small key's
// Steps queued beside the big key's backlog.
type fairShare struct {
	Keys []*keyDispatch `json:"keys"`
	// Workers' start → the last session done.
	Seconds float64 `json:"drain_seconds"`
	// Workers' start → the first task held (the Workers register first).
	FirstMs float64 `json:"first_dispatch_ms"`
	// Dispatches ÷ the time from the first to the last.
	DispatchPerSec float64 `json:"dispatched_per_sec"`
	// The small key's dispatches among the first 2 × its sessions, and
	// that ÷ its fair share (half of them). Goal ≥ 0.5: within 2× of fair.
	Window        int     `json:"window"`
	SmallInWindow int     `json:"small_in_window"`
	ShareOfFair   float64 `json:"small_share_of_fair"`
	// First dispatch → the small key's last, and what it takes at the
	// measured rate when the keys alternate: window ÷ dispatched_per_sec.
	SmallDoneMs      float64 `json:"small_done_ms"`
	IdealSmallDoneMs float64 `json:"ideal_small_done_ms"`
	GoalMet          bool    `json:"goal_met"`
}

type keyDispatch struct {
	Key      string `json:"key"`
	Weight   int    `json:"weight"`
	Sessions int    `json:"sessions"`
	// Sessions no Worker here held a task of.
	Missing int `json:"not_dispatched"`
	// Workers' start → the session's model task held.
	Dispatch *dist `json:"dispatch_ms"`
}

// newFairShare computes the phase's figures from each key's dispatch times
// (ms from the Workers' start) and session counts.
func newFairShare(big, small []float64, nBig, nSmall int) *fairShare {
	f := &fairShare{Window: 2 * nSmall, Keys: []*keyDispatch{
		{Key: bigKey, Weight: 1, Sessions: nBig, Missing: nBig - len(big), Dispatch: newDist(big)},
		{Key: smallKey, Weight: 1, Sessions: nSmall, Missing: nSmall - len(small), Dispatch: newDist(small)},
	}}
	all := slices.Concat(big, small)
	if len(all) == 0 {
		return f
	}
	first, last := slices.Min(all), slices.Max(all)
	f.FirstMs = round1(first)
	rate := 0.0
	if last > first {
		rate = float64(len(all)-1) / (last - first) * 1000
	}
	f.DispatchPerSec = round1(rate)
	f.SmallInWindow = amongFirst(small, big, f.Window)
	f.ShareOfFair = round2(float64(f.SmallInWindow) / float64(nSmall))
	if len(small) > 0 {
		f.SmallDoneMs = round1(slices.Max(small) - first)
	}
	if rate > 0 {
		f.IdealSmallDoneMs = round1(float64(f.Window) / rate * 1000)
	}
	f.GoalMet = f.ShareOfFair >= fairShareGoal
	return f
}

// amongFirst counts the times of mine among the first n of mine and others
// together; a tie goes to others.
func amongFirst(mine, others []float64, n int) int {
	a, b := slices.Sorted(slices.Values(mine)), slices.Sorted(slices.Values(others))
	i, j := 0, 0
	for i+j < n && (i < len(a) || j < len(b)) {
		if i < len(a) && (j >= len(b) || a[i] < b[j]) {
			i++
		} else {
			j++
		}
	}
	return i
}

// priorityLoad is the priority phase: priority 5 sessions created while a
// priority 1 backlog drains.
type priorityLoad struct {
	Backlog int `json:"backlog_sessions"`
	Urgent  int `json:"urgent_sessions"`
	// Workers' start → the last session done.
	Seconds float64 `json:"drain_seconds"`
	// A priority 5 session's CreateSession call began → a Worker holds its
	// model task. Goal: p99 < 50 ms.
	CreateToHeld *dist `json:"urgent_create_to_held"`
	// Its Step queued (ready_at_ms) → the leader proposed the attempt (the
	// broker picked it), and → a Worker holds it.
	QueuedToStart *dist `json:"urgent_queued_to_start_proposed"`
	QueuedToHeld  *dist `json:"urgent_queued_to_held"`
	// Workers' start → a backlog session's task held.
	BacklogDispatch *dist `json:"backlog_dispatch_ms"`
	// Backlog Steps dispatched after the last priority 5 one (or never):
	// still queued when it went out.
	BacklogLeft   int  `json:"backlog_left_at_last_urgent"`
	UrgentMissing int  `json:"urgent_not_dispatched"`
	GoalMet       bool `json:"goal_met"`
}

// urgentAfter is how many backlog Steps must have gone out before priority
// 5 session j of n is created: the n are spread over the first 80 % of the
// backlog, so a backlog is still queued when the last one is, and the
// first waits for the Workers to be polling.
func urgentAfter(j, n, backlog int) int {
	return max(1, (j+1)*4*backlog/(5*n))
}

// backlogLeft counts the backlog sessions dispatched after t, or never (of
// n), all times in ms from the Workers' start.
func backlogLeft(backlog []float64, n int, t float64) int {
	left := n - len(backlog)
	for _, x := range backlog {
		if x > t {
			left++
		}
	}
	return left
}

func round1(x float64) float64 { return math.Round(x*10) / 10 }

func metOrMissed(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
}

func (r *fairnessReport) writeTable(w io.Writer) {
	fmt.Fprintf(w, "dexbench --fairness: %d dexd nodes (fsync on), %d partition(s), %d Workers x %d, one model call a session, leader %s\n",
		r.Config.Nodes, r.Config.Partitions, r.Config.Workers, r.Config.Concurrency, r.Leader)
	fmt.Fprintf(w, "machine: %d CPU, %s, %s %s\n", r.Machine.NProc, r.Machine.CPU, r.Machine.GoVersion, r.Machine.OS)
	if f := r.Fair; f != nil {
		fmt.Fprintln(w)
		f.write(w, r.Config)
	}
	if p := r.Priority; p != nil {
		fmt.Fprintln(w)
		p.write(w)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "latency (ms)\tn\tp50\tp90\tp99\tmax\tmean\t")
	row := func(name string, d *dist) {
		if d == nil || d.N == 0 {
			return
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t\n", name, d.N, d.P50, d.P90, d.P99, d.Max, d.Mean)
	}
	if f := r.Fair; f != nil {
		for _, k := range f.Keys {
			row(fmt.Sprintf("key %q: Workers' start → task held", k.Key), k.Dispatch)
		}
	}
	if p := r.Priority; p != nil {
		row("priority 5: CreateSession call → task held", p.CreateToHeld)
		row("  queued → StartAttempt proposed", p.QueuedToStart)
		row("  queued → task held", p.QueuedToHeld)
		row("priority 1: Workers' start → task held", p.BacklogDispatch)
	}
	row("fsync probe: 4 KiB write+fsync", r.Fsync)
	tw.Flush()
	fmt.Fprintf(w, "\nworker warnings: %d\n", r.WorkerWarnings)
	if r.Error != "" {
		fmt.Fprintf(w, "\nerror: %s\n", r.Error)
	}
}

func (f *fairShare) write(w io.Writer, c fairnessConfig) {
	fmt.Fprintf(w, "fair share: %d sessions of key %q and %d of key %q, weight 1 each, one model Step a session, queued before the Workers started\n",
		c.Big, bigKey, c.Small, smallKey)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "drain\t%.2f s\t%.1f dispatched/s (first task held %.1f ms after the Workers started)\n", f.Seconds, f.DispatchPerSec, f.FirstMs)
	fmt.Fprintf(tw, "small key's share\t%.2f of fair\t%d of the first %d dispatches (fair: %d; goal ≥ %.1f: %s)\n",
		f.ShareOfFair, f.SmallInWindow, f.Window, f.Window/2, fairShareGoal, metOrMissed(f.GoalMet))
	fmt.Fprintf(tw, "small key's last\t%.1f ms\tafter the first dispatch; ideal %.1f ms (%d ÷ %.1f/s)\n", f.SmallDoneMs, f.IdealSmallDoneMs, f.Window, f.DispatchPerSec)
	for _, k := range f.Keys {
		if k.Missing > 0 {
			fmt.Fprintf(tw, "not dispatched\t%d\tsessions of key %q no Worker here held a task of\n", k.Missing, k.Key)
		}
	}
	tw.Flush()
}

func (p *priorityLoad) write(w io.Writer) {
	fmt.Fprintf(w, "priority: %d priority 1 sessions queued before the Workers started, %d priority 5 ones created one by one as they drained\n", p.Backlog, p.Urgent)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "drain\t%.2f s\t(Workers' start → last session done)\n", p.Seconds)
	fmt.Fprintf(tw, "priority 5 p99\t%.1f ms\tCreateSession call → a Worker holds its task (goal < %d ms: %s)\n", p.CreateToHeld.P99, urgentGoalMs, metOrMissed(p.GoalMet))
	fmt.Fprintf(tw, "backlog left\t%d\tpriority 1 Steps still queued when the last priority 5 one was dispatched\n", p.BacklogLeft)
	if p.UrgentMissing > 0 {
		fmt.Fprintf(tw, "not dispatched\t%d\tpriority 5 sessions no Worker here held a task of\n", p.UrgentMissing)
	}
	tw.Flush()
}
