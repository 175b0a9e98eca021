package main

import "testing"

func TestMedian_OddEvenAndEmpty(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v; want %v", c.in, got, c.want)
		}
	}
	in := []float64{3, 1, 2}
	median(in)
	if in[0] != 3 || in[1] != 1 {
		t.Errorf("median sorted its input: %v", in)
	}
}

func TestCPUPerStep_SumsEveryProcessOverSucceededSteps(t *testing.T) {
	r := &report{
		StepsSucceeded:        800,
		Raft:                  &raftStats{CPUSeconds: map[string]float64{"n1": 0.8, "n2": 0.4, "n3": 0.4, "dexbench": 0.4}},
		MachineBusyCPUSeconds: 3.2,
	}
	r.setCPUPerStep()
	if r.CPUMsPerStep != 2.5 || r.MachineBusyMsPerStep != 4 {
		t.Errorf("CPU per Step %v ms, busy %v ms; want 2.5 and 4", r.CPUMsPerStep, r.MachineBusyMsPerStep)
	}
	none := &report{Raft: &raftStats{CPUSeconds: map[string]float64{"n1": 1}}}
	none.setCPUPerStep()
	if none.CPUMsPerStep != 0 {
		t.Errorf("no succeeded Step: %v ms per Step; want 0", none.CPUMsPerStep)
	}
}

func TestSummarize_MediansOfEveryHeadlineFigure(t *testing.T) {
	reps := []*report{
		{StepsPerSec: 900, Dispatch: &dist{P50: 100, P99: 300}, MachineBusy: 90, CPUMsPerStep: 2.4, MachineBusyMsPerStep: 3.1},
		{StepsPerSec: 1100, Dispatch: &dist{P50: 80, P99: 200}, MachineBusy: 95, CPUMsPerStep: 2.0, MachineBusyMsPerStep: 2.9},
		{StepsPerSec: 1000, Dispatch: &dist{P50: 90, P99: 250}, MachineBusy: 85, CPUMsPerStep: 2.2, MachineBusyMsPerStep: 3.3},
	}
	s := summarize(reps)
	if s.Runs != 3 || s.MedianStepsPS != 1000 || s.MedianP50 != 90 || s.MedianP99 != 250 || s.MedianBusy != 90 {
		t.Errorf("summary %+v", s)
	}
	if s.MedianCPUMsPerStep != 2.2 || s.MedianBusyMsPerStep != 3.1 {
		t.Errorf("CPU per Step median %v, busy %v; want 2.2 and 3.1", s.MedianCPUMsPerStep, s.MedianBusyMsPerStep)
	}
}

func TestSummarize_EvenRunsRoundTheCPUMedian(t *testing.T) {
	s := summarize([]*report{{CPUMsPerStep: 2.95}, {CPUMsPerStep: 3.6}})
	if s.MedianCPUMsPerStep != 3.28 {
		t.Errorf("median of 2.95 and 3.6 = %v; want 3.28", s.MedianCPUMsPerStep)
	}
}
