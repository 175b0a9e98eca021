package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func etcdRun(putsPerSec, p50, p99, cpuPerPut, busy float64) *etcdReport {
	return &etcdReport{Bench: "etcd", Version: "3.4.23", ValueBytes: 4096, PutsPerSec: putsPerSec,
		Latency: &dist{P50: p50, P99: p99}, CPUMsPerPut: cpuPerPut, MachineBusyMsPerPut: cpuPerPut + 0.1, MachineBusy: busy}
}

func dexRun(stepsPerSec, cpuPerStep, busy float64) *report {
	return &report{Config: config{PayloadBytes: 4096}, StepsPerSec: stepsPerSec, Dispatch: &dist{P50: 150, P99: 300},
		CPUMsPerStep: cpuPerStep, MachineBusyMsPerStep: cpuPerStep + 0.5, MachineBusy: busy}
}

func TestCompare_MediansAndRatioOfTheMedians(t *testing.T) {
	c := compare(
		[]*etcdReport{etcdRun(5000, 10, 30, 0.5, 90), etcdRun(4000, 12, 40, 0.7, 95), etcdRun(4500, 11, 35, 0.6, 92)},
		[]*report{dexRun(900, 3.0, 88), dexRun(1100, 2.6, 91), dexRun(1000, 2.8, 93)},
	)
	if c.Runs != 3 || c.MedianPutsPerSec != 4500 || c.MedianStepsPerSec != 1000 {
		t.Fatalf("medians: %v puts/s, %v steps/s over %d runs", c.MedianPutsPerSec, c.MedianStepsPerSec, c.Runs)
	}
	// The ratio is of the medians (1000 ÷ 4500), not the median of the
	// per-pair ratios, rounded to three decimals.
	if c.StepsPerPut != 0.222 {
		t.Errorf("steps/s ÷ puts/s = %v; want 0.222", c.StepsPerPut)
	}
	if c.MedianPutP50 != 11 || c.MedianPutP99 != 35 || c.MedianDispatchP50 != 150 {
		t.Errorf("latency medians: put %v / %v, dispatch p50 %v", c.MedianPutP50, c.MedianPutP99, c.MedianDispatchP50)
	}
	if c.MedianCPUMsPerPut != 0.6 || c.MedianCPUMsPerStep != 2.8 || c.MedianBusyMsPerPut != 0.7 || c.MedianBusyMsPerStep != 3.3 {
		t.Errorf("CPU medians: %v / %v ms, busy %v / %v ms", c.MedianCPUMsPerPut, c.MedianCPUMsPerStep, c.MedianBusyMsPerPut, c.MedianBusyMsPerStep)
	}
	if c.MedianBusyEtcd != 92 || c.MedianBusyDex != 91 || c.ValueBytes != 4096 || c.PayloadBytes != 4096 || c.EtcdVersion != "3.4.23" {
		t.Errorf("comparison %+v", c)
	}
}

func TestCompare_NoPutsGivesNoRatioRatherThanInfinity(t *testing.T) {
	c := compare([]*etcdReport{etcdRun(0, 0, 0, 0, 0)}, []*report{dexRun(1000, 3, 90)})
	if c.StepsPerPut != 0 {
		t.Errorf("steps/s ÷ 0 puts/s = %v; want 0", c.StepsPerPut)
	}
}

func TestComparison_JSONAndTableCarryTheFigures(t *testing.T) {
	c := compare([]*etcdReport{etcdRun(5000, 10, 30, 0.5, 90)}, []*report{dexRun(1000, 3, 90)})
	var buf bytes.Buffer
	writeJSON(&buf, c)
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"median_etcd_puts_per_sec", "median_dex_steps_per_sec", "steps_per_sec_over_puts_per_sec",
		"median_dex_cpu_ms_per_step", "median_etcd_cpu_ms_per_put", "median_etcd_machine_busy_pct", "median_dex_machine_busy_pct"} {
		if _, ok := got[k]; !ok {
			t.Errorf("JSON lacks %s: %s", k, buf.String())
		}
	}
	buf.Reset()
	c.writeTable(&buf)
	for _, want := range []string{"5000.0 puts/s", "1000.0 steps/s", "steps/s ÷ puts/s = 0.200", "3.00 ms per Step", "0.50 ms per put"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, buf.String())
		}
	}
}

func TestEtcdValueSize_FollowsPayloadUnlessSet(t *testing.T) {
	for _, c := range []struct {
		args []string
		want int
	}{
		{nil, 256},
		{[]string{"--payload", "4KiB"}, 4096},
		{[]string{"--payload", "4KiB", "--etcd-value-size", "100"}, 100},
	} {
		o := options{}
		var eo etcdOptions
		fs := benchFlags("dexbench etcd", &o)
		eo.register(fs)
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		eo.bin = "sh" // any binary on PATH: resolve only looks it up
		if err := eo.resolve(fs, o); err != nil {
			t.Fatal(err)
		}
		if int(eo.valueSize) != c.want {
			t.Errorf("%v: value size %d; want %d", c.args, eo.valueSize, c.want)
		}
	}
}
