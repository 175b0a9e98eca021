package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"text/tabwriter"
)

// comparison is what `dexbench etcd` prints last: the medians of the etcd
// runs beside those of the Dex runs, which alternated with them on the
// same machine, and Dex's steps/s as a share of etcd's puts/s.
type comparison struct {
	Bench        string    `json:"bench"` // "etcd_vs_dex"
	Runs         int       `json:"runs"`
	EtcdVersion  string    `json:"etcd_version"`
	ValueBytes   int       `json:"etcd_value_bytes"`
	PayloadBytes int       `json:"dex_payload_bytes"`
	PutsPerSec   []float64 `json:"etcd_puts_per_sec"`
	StepsPerSec  []float64 `json:"dex_steps_per_sec"`

	MedianPutsPerSec  float64 `json:"median_etcd_puts_per_sec"`
	MedianStepsPerSec float64 `json:"median_dex_steps_per_sec"`
	// Median steps/s ÷ median puts/s.
	StepsPerPut float64 `json:"steps_per_sec_over_puts_per_sec"`

	MedianPutP50      float64 `json:"median_etcd_put_p50_ms"`
	MedianPutP99      float64 `json:"median_etcd_put_p99_ms"`
	MedianDispatchP50 float64 `json:"median_dex_dispatch_p50_ms"`
	MedianDispatchP99 float64 `json:"median_dex_dispatch_p99_ms"`

	MedianCPUMsPerPut   float64 `json:"median_etcd_cpu_ms_per_put"`
	MedianCPUMsPerStep  float64 `json:"median_dex_cpu_ms_per_step"`
	MedianBusyMsPerPut  float64 `json:"median_etcd_machine_busy_ms_per_put"`
	MedianBusyMsPerStep float64 `json:"median_dex_machine_busy_ms_per_step"`
	MedianBusyEtcd      float64 `json:"median_etcd_machine_busy_pct"`
	MedianBusyDex       float64 `json:"median_dex_machine_busy_pct"`
}

func compare(etcd []*etcdReport, dex []*report) *comparison {
	c := &comparison{Bench: "etcd_vs_dex", Runs: min(len(etcd), len(dex))}
	var putP50, putP99, cpuPut, busyPut, busyEtcd []float64
	for _, e := range etcd {
		c.EtcdVersion, c.ValueBytes = e.Version, e.ValueBytes
		c.PutsPerSec = append(c.PutsPerSec, e.PutsPerSec)
		if e.Latency != nil {
			putP50, putP99 = append(putP50, e.Latency.P50), append(putP99, e.Latency.P99)
		}
		cpuPut, busyPut, busyEtcd = append(cpuPut, e.CPUMsPerPut), append(busyPut, e.MachineBusyMsPerPut), append(busyEtcd, e.MachineBusy)
	}
	for _, r := range dex {
		c.PayloadBytes = r.Config.PayloadBytes
	}
	s := summarize(dex)
	c.StepsPerSec = s.StepsPerSec
	c.MedianPutsPerSec, c.MedianStepsPerSec = median(c.PutsPerSec), s.MedianStepsPS
	if c.MedianPutsPerSec > 0 {
		c.StepsPerPut = math.Round(c.MedianStepsPerSec/c.MedianPutsPerSec*1000) / 1000
	}
	c.MedianPutP50, c.MedianPutP99 = median(putP50), median(putP99)
	c.MedianDispatchP50, c.MedianDispatchP99 = s.MedianP50, s.MedianP99
	c.MedianCPUMsPerPut, c.MedianCPUMsPerStep = round2(median(cpuPut)), s.MedianCPUMsPerStep
	c.MedianBusyMsPerPut, c.MedianBusyMsPerStep = round2(median(busyPut)), s.MedianBusyMsPerStep
	c.MedianBusyEtcd, c.MedianBusyDex = median(busyEtcd), s.MedianBusy
	return c
}

func (c *comparison) writeTable(w io.Writer) {
	fmt.Fprintf(w, "\nDex beside etcd on this machine, %d run(s) each, etcd and Dex alternating (medians): etcd puts/s %v, Dex steps/s %v\n\n",
		c.Runs, c.PutsPerSec, c.StepsPerSec)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "\tetcd %s, 3 members\tDex, 3 nodes\t\n", c.EtcdVersion)
	fmt.Fprintf(tw, "throughput\t%.1f puts/s\t%.1f steps/s\tsteps/s ÷ puts/s = %.3f\n", c.MedianPutsPerSec, c.MedianStepsPerSec, c.StepsPerPut)
	fmt.Fprintf(tw, "latency p50 / p99\tput %.1f / %.1f ms\tdispatch %.1f / %.1f ms\t\n", c.MedianPutP50, c.MedianPutP99, c.MedianDispatchP50, c.MedianDispatchP99)
	fmt.Fprintf(tw, "CPU per operation\t%.2f ms per put\t%.2f ms per Step\t(servers + dexbench)\n", c.MedianCPUMsPerPut, c.MedianCPUMsPerStep)
	fmt.Fprintf(tw, "machine busy per operation\t%.2f ms per put\t%.2f ms per Step\t(every process counted)\n", c.MedianBusyMsPerPut, c.MedianBusyMsPerStep)
	fmt.Fprintf(tw, "machine busy\t%.1f%%\t%.1f%%\t\n", c.MedianBusyEtcd, c.MedianBusyDex)
	fmt.Fprintf(tw, "bytes per operation\t%d B value\t%d B payload\t\n", c.ValueBytes, c.PayloadBytes)
	tw.Flush()
}

// writeJSON writes v indented, one object of dexbench's --json stream.
func writeJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// tableReport is a mode's report: a table, or JSON with --json.
type tableReport interface{ writeTable(w io.Writer) }

// printReport prints a mode's report (none when rep is nil) and returns the
// exit code dexbench must stop with: 130 once ctx was interrupted, saying
// what was stopped; 1 with err.
func printReport(ctx context.Context, o options, rep tableReport, err error, stopped string) int {
	if ctx.Err() != nil {
		fmt.Fprintln(os.Stderr, "dexbench: interrupted;", stopped)
		return 130
	}
	if rep != nil {
		if o.jsonOut {
			writeJSON(os.Stdout, rep)
		} else {
			rep.writeTable(os.Stdout)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dexbench:", err)
		return 1
	}
	return 0
}
