package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
)

// summary is what --runs N adds after its N reports: the median of each
// headline figure over the runs, each run on a fresh cluster. One run of
// the defaults lasts about a second, and single runs vary by ±15 %.
type summary struct {
	Runs          int       `json:"runs"`
	StepsPerSec   []float64 `json:"steps_per_sec"`
	MedianStepsPS float64   `json:"median_steps_per_sec"`
	MedianP50     float64   `json:"median_dispatch_p50_ms"`
	MedianP99     float64   `json:"median_dispatch_p99_ms"`
	MedianBusy    float64   `json:"median_machine_busy_pct"`
	// CPU ms per succeeded Step (dexd × 3 + dexbench), and the machine's.
	MedianCPUMsPerStep  float64 `json:"median_cpu_ms_per_step"`
	MedianBusyMsPerStep float64 `json:"median_machine_busy_ms_per_step"`
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func summarize(reps []*report) *summary {
	s := &summary{Runs: len(reps)}
	var p50, p99, busy, cpuPerStep, busyPerStep []float64
	for _, r := range reps {
		cpuPerStep, busyPerStep = append(cpuPerStep, r.CPUMsPerStep), append(busyPerStep, r.MachineBusyMsPerStep)
		s.StepsPerSec = append(s.StepsPerSec, r.StepsPerSec)
		if r.Dispatch != nil {
			p50, p99 = append(p50, r.Dispatch.P50), append(p99, r.Dispatch.P99)
		}
		busy = append(busy, r.MachineBusy)
	}
	s.MedianStepsPS, s.MedianP50, s.MedianP99, s.MedianBusy = median(s.StepsPerSec), median(p50), median(p99), median(busy)
	s.MedianCPUMsPerStep, s.MedianBusyMsPerStep = round2(median(cpuPerStep)), round2(median(busyPerStep))
	return s
}

func (s *summary) writeTable(w io.Writer) {
	fmt.Fprintf(w, "\nover %d runs, each on a fresh cluster: steps/s %v\n", s.Runs, s.StepsPerSec)
	fmt.Fprintf(w, "median           %.1f steps/s, dispatch p50 %.1f ms, p99 %.1f ms, machine busy %.1f%%\n",
		s.MedianStepsPS, s.MedianP50, s.MedianP99, s.MedianBusy)
	fmt.Fprintf(w, "                 CPU per Step %.2f ms (dexd × 3 + dexbench), machine busy %.2f ms per Step\n",
		s.MedianCPUMsPerStep, s.MedianBusyMsPerStep)
}

func (s *summary) writeJSON(w io.Writer) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(s)
}
