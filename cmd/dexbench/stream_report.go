package main

import (
	"fmt"
	"io"
	"math"
	"sync"
	"text/tabwriter"
	"time"
)

// The leader's memory while the streams run, the phases' figures and the
// report.

// rssPeak reads a process's RSS every rssEvery until stopped and keeps the
// highest.
type rssPeak struct {
	stop chan struct{}
	done chan int64
	once sync.Once
	peak int64
}

func watchRSS(pid int) *rssPeak {
	p := &rssPeak{stop: make(chan struct{}), done: make(chan int64, 1)}
	go func() {
		tick := time.NewTicker(rssEvery)
		defer tick.Stop()
		peak := readProcMem(pid).RSS
		for {
			select {
			case <-p.stop:
				p.done <- max(peak, readProcMem(pid).RSS)
				return
			case <-tick.C:
				peak = max(peak, readProcMem(pid).RSS)
			}
		}
	}()
	return p
}

// end stops the reads (the first time) and returns the peak, in bytes.
func (p *rssPeak) end() int64 {
	p.once.Do(func() {
		close(p.stop)
		p.peak = <-p.done
	})
	return p.peak
}

// streamPhase is one phase of the stream sessions.
type streamPhase struct {
	// The phase's wall time: the first turn's message sent → the last turn
	// done (alone), the measured run (beside the load).
	Seconds float64 `json:"seconds"`
	// Stream turns done, and deltas streamed in the phase and received whole.
	Turns  int `json:"turns"`
	Deltas int `json:"deltas"`
	// Deltas received ÷ (rate × seconds): the streams running at once, on
	// average.
	StreamsAtOnce float64 `json:"streams_at_once"`
	// Handler's Stream call → the watcher received the delta whole.
	Latency *dist `json:"latency"`
	// Leader RSS, highest while the phase ran (read every 100 ms).
	LeaderPeakRSS int64 `json:"leader_peak_rss_bytes"`
	// CPU the leader and dexbench (the stream Workers and watchers) used
	// over the phase; measured for the streams alone, where nothing else
	// runs: what the streams cost, read from each process, whatever else
	// the machine runs.
	LeaderCPUSeconds float64 `json:"leader_cpu_seconds,omitempty"`
	BenchCPUSeconds  float64 `json:"dexbench_cpu_seconds,omitempty"`
}

// cpuPerDelta is seconds ÷ the phase's deltas, in µs.
func (p *streamPhase) cpuPerDelta(seconds float64) float64 {
	if p.Deltas == 0 {
		return 0
	}
	return math.Round(seconds/float64(p.Deltas)*1e7) / 10
}

// newStreamPhase fills a phase's figures from its latencies and span.
func newStreamPhase(latencies []float64, turns int, span time.Duration, rate float64, peak int64) *streamPhase {
	p := &streamPhase{Seconds: round2(span.Seconds()), Turns: turns, Deltas: len(latencies), Latency: newDist(latencies), LeaderPeakRSS: peak}
	if span > 0 {
		p.StreamsAtOnce = round1(float64(len(latencies)) / (rate * span.Seconds()))
	}
	return p
}

// streamResult is what the stream sessions measured during the run with
// streams.
type streamResult struct {
	Alone  *streamPhase `json:"alone,omitempty"`
	Beside *streamPhase `json:"beside_load,omitempty"`
	// Leader RSS before the stream sessions were created, and once they
	// were created and watched (nothing streaming yet).
	LeaderRSSBefore  int64 `json:"leader_rss_before_bytes"`
	LeaderRSSWatched int64 `json:"leader_rss_watched_bytes"`
	// (peak streaming alone − before) ÷ streams: a stream session with its
	// watch and live output; and (peak − watched) ÷ streams: the streaming.
	RSSPerStream          float64 `json:"rss_bytes_per_stream"`
	RSSPerStreamStreaming float64 `json:"rss_bytes_per_stream_streaming_only"`
	// Model Steps whose watched text was compared with the committed output.
	StepsChecked   int      `json:"steps_checked"`
	TextMismatches []string `json:"text_mismatches,omitempty"`
	Abandoned      int      `json:"attempts_abandoned"`
	NotReceived    int      `json:"deltas_not_received"`
	WorkerWarnings int64    `json:"stream_worker_warnings"`
}

// perStream is (after − before) ÷ n bytes.
func perStream(before, after int64, n int) float64 {
	if n <= 0 || before == 0 || after == 0 {
		return 0
	}
	return math.Round(float64(after-before)/float64(n)*10) / 10
}

func (r *streamReport) writeTable(w io.Writer) {
	c := r.Config
	fmt.Fprintf(w, "dexbench --stream: %s, each streaming turns of %d deltas of %d B at %g/s to a watcher of its own; %d sessions at once measured without, then beside, the streams\n",
		plural(c.Streams, "stream session"), c.Deltas, c.DeltaBytes, c.Rate, c.Sessions)
	fmt.Fprintf(w, "%d Workers x %d for the sessions and %d x %d for the streams, %d dexd nodes (fsync on), %d partition(s), each run on a fresh cluster\n",
		c.Workers, c.Concurrency, c.Workers, c.StreamConcurrency, c.Nodes, c.Partitions)
	fmt.Fprintf(w, "machine: %d CPU, %s, %s %s\n", r.Machine.NProc, r.Machine.CPU, r.Machine.GoVersion, r.Machine.OS)
	if r.Plain != nil && r.Loaded != nil {
		fmt.Fprintln(w)
		r.writeRuns(w)
	}
	if s := r.Stream; s != nil {
		fmt.Fprintln(w)
		r.writeStreams(w, s)
	}
	if r.Error != "" {
		fmt.Fprintf(w, "\nerror: %s\n", r.Error)
	}
}

// writeRuns prints the measured run without and with streams side by side.
func (r *streamReport) writeRuns(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "measured run\twithout streams\twith streams\t")
	both := func(name string, f func(*report) string) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t\n", name, f(r.Plain), f(r.Loaded))
	}
	both("leader", func(p *report) string { return p.Leader })
	both("wall time", func(p *report) string { return fmt.Sprintf("%.2f s", p.WallSeconds) })
	both("sessions idle", func(p *report) string { return fmt.Sprintf("%d / %d", p.SessionsIdle, p.SessionsIdle+p.SessionsFailed) })
	both("steps succeeded", func(p *report) string { return fmt.Sprintf("%d / %d", p.StepsSucceeded, p.Steps) })
	both("steps/s", func(p *report) string { return fmt.Sprintf("%.1f", p.StepsPerSec) })
	pcts := func(d *dist) string {
		if d == nil || d.N == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f / %.1f / %.1f ms", d.P50, d.P99, d.Max)
	}
	both("dispatch p50 / p99 / max", func(p *report) string { return pcts(p.Dispatch) })
	both("turn p50 / p99 / max", func(p *report) string { return pcts(p.Turn) })
	both("leader CPU seconds", func(p *report) string {
		if p.Raft == nil {
			return "-"
		}
		return fmt.Sprintf("%.2f", p.Raft.CPUSeconds[p.Leader])
	})
	both("dexbench CPU seconds", func(p *report) string {
		if p.Raft == nil {
			return "-"
		}
		return fmt.Sprintf("%.2f", p.Raft.CPUSeconds["dexbench"])
	})
	both("machine busy", func(p *report) string { return fmt.Sprintf("%.1f%%", p.MachineBusy) })
	both("worker warnings", func(p *report) string { return fmt.Sprintf("%d", p.WorkerWarnings) })
	tw.Flush()
	fmt.Fprintf(w, "steps/s with streams ÷ without: %.2f (goal ≥ %.2f: %s)\n", r.StepsRatio, streamStepsGoal, metOrMissed(r.StepsGoalMet))
}

// writeStreams prints the stream sessions' phases, latency, memory and check.
func (r *streamReport) writeStreams(w io.Writer, s *streamResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if a := s.Alone; a != nil {
		fmt.Fprintf(tw, "streams alone\t%.2f s\t%s, %d deltas, %.1f streams at once on average, nothing else running\n", a.Seconds, plural(a.Turns, "turn"), a.Deltas, a.StreamsAtOnce)
	}
	if b := s.Beside; b != nil {
		fmt.Fprintf(tw, "streams beside the load\t%.2f s\t%s from before the measured run to after it, %d deltas streamed during it, %.1f streams at once on average\n",
			b.Seconds, plural(b.Turns, "turn"), b.Deltas, b.StreamsAtOnce)
	}
	fmt.Fprintf(tw, "text check\t%d Steps\tthe watcher's text of each streamed model Step equals its committed output: %d differ; %d attempts abandoned, %d deltas never received\n",
		s.StepsChecked, len(s.TextMismatches), s.Abandoned, s.NotReceived)
	fmt.Fprintf(tw, "stream worker warnings\t%d\t\n", s.WorkerWarnings)
	tw.Flush()
	for i, m := range s.TextMismatches {
		if i == 10 {
			fmt.Fprintf(w, "  … and %d more\n", len(s.TextMismatches)-i)
			break
		}
		fmt.Fprintf(w, "  %s\n", m)
	}

	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "Stream call → watcher (ms)\tn\tp50\tp90\tp99\tmax\tmean\t")
	row := func(name string, p *streamPhase) {
		if p == nil || p.Latency == nil || p.Latency.N == 0 {
			return
		}
		d := p.Latency
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t\n", name, d.N, d.P50, d.P90, d.P99, d.Max, d.Mean)
	}
	row("streams alone", s.Alone)
	row("streams beside the load", s.Beside)
	tw.Flush()
	if a := s.Alone; a != nil && a.Deltas > 0 {
		fmt.Fprintf(w, "CPU per delta, streams alone: leader %.1f µs, dexbench %.1f µs (%.2f and %.2f CPU seconds over %.2f s)\n",
			a.cpuPerDelta(a.LeaderCPUSeconds), a.cpuPerDelta(a.BenchCPUSeconds), a.LeaderCPUSeconds, a.BenchCPUSeconds, a.Seconds)
	}
	if a := s.Alone; a != nil {
		scope := "one stream: unloaded"
		if r.Config.Streams > 1 {
			scope = fmt.Sprintf("%d streams at once; the goal is for one, --stream 1", r.Config.Streams)
		}
		fmt.Fprintf(w, "goal, streams alone (%s): p50 < %d ms and p99 < %d ms: %s\n", scope, streamP50GoalMs, streamP99GoalMs, metOrMissed(r.LatencyGoalMet))
	}

	fmt.Fprintln(w)
	leader := "the leader"
	if r.Loaded != nil {
		leader += " " + r.Loaded.Leader
	}
	fmt.Fprintf(w, "memory of %s (RSS, MiB): %.1f before the stream sessions, %.1f once created and watched", leader, mib(s.LeaderRSSBefore), mib(s.LeaderRSSWatched))
	if a := s.Alone; a != nil {
		fmt.Fprintf(w, ", %.1f at most streaming alone", mib(a.LeaderPeakRSS))
	}
	if b := s.Beside; b != nil {
		fmt.Fprintf(w, ", %.1f at most beside the load", mib(b.LeaderPeakRSS))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "RSS per stream: %.1f KiB ((most streaming alone − before) ÷ %d), of which streaming %.1f KiB ((most streaming alone − watched) ÷ %d)\n",
		s.RSSPerStream/1024, r.Config.Streams, s.RSSPerStreamStreaming/1024, r.Config.Streams)
}

// plural is "1 turn", "2 turns".
func plural(n int, one string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %ss", n, one)
}
