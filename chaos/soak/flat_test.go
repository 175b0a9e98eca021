package soak

import (
	"strings"
	"testing"
	"time"
)

// A judged window of 3 minutes against minute 3, for runs of 6 minutes or
// more, 10 % tolerance.
var testFlatRule = FlatRule{Ref: 3 * time.Minute, Window: 3 * time.Minute, MinRun: 6 * time.Minute, Tolerance: 0.10}

// flatRun samples every minute from 1 to 6; each figure grows until minute
// 3 and then stays within 5 % of minute 3's.
func flatRun() []FlatSample {
	var out []FlatSample
	for m := 1; m <= 6; m++ {
		f := 1.0
		switch {
		case m < 3:
			f = 0.3 * float64(m)
		case m%2 == 0:
			f = 1.05
		case m > 3:
			f = 0.96
		}
		out = append(out, FlatSample{At: time.Duration(m) * time.Minute, Node: "n1",
			SnapshotBytes: int64(f * 1e6), RSSBytes: int64(f * 100e6), Restore: time.Duration(f * float64(200*time.Millisecond))})
	}
	return out
}

func TestJudgeFlatAcceptsFiguresWithinTheTolerance(t *testing.T) {
	v := JudgeFlat(flatRun(), 6*time.Minute, testFlatRule)
	if !v.Judged || !v.Flat || v.Ref != 3*time.Minute || len(v.Over) > 0 {
		t.Fatalf("a flat run: %+v", v)
	}
	// The window (minutes 3 to 6: 1, 0.96, 1.05, 1.05) has a median of
	// 1.025 against minute 3's 1; its largest single sample is 5 % off.
	if w := v.Worst["snapshot bytes"]; w < 0.024 || w > 0.026 {
		t.Fatalf("distance of the snapshot size's median %v, want 2.5%%", w)
	}
	if w := v.Spread["snapshot bytes"]; w < 0.049 || w > 0.051 {
		t.Fatalf("largest single sample's distance %v, want 5%%", w)
	}
}

// One sample off (a leader restarted a minute ago, a restore timed while
// the machine was busy) is not growth: the medians judge.
func TestJudgeFlatLetsOneSampleOff(t *testing.T) {
	s := flatRun()
	s[4].RSSBytes = 150e6 // minute 5: 50 % over minute 3's
	v := JudgeFlat(s, 6*time.Minute, testFlatRule)
	if !v.Flat || v.Spread["leader RSS"] < 0.49 {
		t.Fatalf("one sample off: %+v", v)
	}
}

func TestJudgeFlatFlagsAFigureThatGrows(t *testing.T) {
	s := flatRun()
	for i := 3; i < 6; i++ { // minutes 4 to 6: 15 % over minute 3's
		s[i].RSSBytes = 115e6
	}
	v := JudgeFlat(s, 6*time.Minute, testFlatRule)
	if !v.Judged || v.Flat || len(v.Over) != 1 || !strings.Contains(v.Over[0], "leader RSS: the median of the last 3m0s (4 samples) is 15% from the reference's") {
		t.Fatalf("a growing RSS: %+v", v)
	}
	s = flatRun()
	for i := 2; i < 6; i++ {
		s[i].Restore = 150 * time.Millisecond // 25 % under minute 3's
	}
	s[2].Restore = 200 * time.Millisecond
	if v := JudgeFlat(s, 6*time.Minute, testFlatRule); v.Flat || len(v.Over) != 1 || !strings.Contains(v.Over[0], "restore time") || !strings.Contains(v.Over[0], "150ms against 200ms") {
		t.Fatalf("a restore time that moved: %+v", v)
	}
}

// withRestoreCPU gives every sample of a run a restore CPU time: f times
// its wall time.
func withRestoreCPU(s []FlatSample, f float64) []FlatSample {
	for i := range s {
		s[i].RestoreCPU = time.Duration(f * float64(s[i].Restore))
	}
	return s
}

// With a restore CPU time in every sample, the restore is judged by it:
// wall time that moved with the machine's load does not fail the run, CPU
// time that grew does.
func TestJudgeFlatJudgesTheRestoreByItsCPUTimeWhenEverySampleHasOne(t *testing.T) {
	s := withRestoreCPU(flatRun(), 1.5)
	for i := 3; i < 6; i++ {
		s[i].Restore *= 2 // the wall time of minutes 4 to 6 doubled, its CPU did not
	}
	v := JudgeFlat(s, 6*time.Minute, testFlatRule)
	if !v.Flat || v.Worst["restore CPU time"] > 0.03 {
		t.Fatalf("wall time moved, CPU time flat: %+v", v)
	}
	if _, judged := v.Worst["restore time"]; judged {
		t.Fatalf("the wall time was judged beside the CPU time: %+v", v.Worst)
	}
	for i := 3; i < 6; i++ {
		s[i].RestoreCPU = 360 * time.Millisecond // 20 % over minute 3's 300 ms
	}
	if v := JudgeFlat(s, 6*time.Minute, testFlatRule); v.Flat || len(v.Over) != 1 || !strings.Contains(v.Over[0], "restore CPU time") || !strings.Contains(v.Over[0], "360ms against 300ms") {
		t.Fatalf("a restore CPU time that grew: %+v", v)
	}
	// One complete sample without a CPU time (a restore timed in the
	// soak's own process): the wall time is judged, and it doubled.
	s[1].RestoreCPU = 0
	if v := JudgeFlat(s, 6*time.Minute, testFlatRule); v.Flat || !strings.Contains(strings.Join(v.Over, "\n"), "restore time: the median") {
		t.Fatalf("a run with a sample without CPU time: %+v", v)
	}
}

// The reference is the median of the samples around Ref.
func TestJudgeFlatReferenceIsTheMedianAroundRef(t *testing.T) {
	s := flatRun()
	s[2].SnapshotBytes = 2e6 // minute 3 alone would make the rest look 50 % off
	rule := testFlatRule
	rule.RefSpan = 2 * time.Minute // minutes 2 to 4: 0.6, 2, 1.05 MB
	v := JudgeFlat(s, 6*time.Minute, rule)
	if v.Ref != 2*time.Minute || v.RefTo != 4*time.Minute || v.Worst["snapshot bytes"] > 0.1 {
		t.Fatalf("a reference of minutes 2 to 4: %+v", v)
	}
	if v := JudgeFlat(s, 6*time.Minute, testFlatRule); v.Flat {
		t.Fatalf("minute 3 alone as the reference: %+v", v)
	}
}

func TestJudgeFlatLooksOnlyAtTheLastWindow(t *testing.T) {
	s := flatRun()
	s[1].SnapshotBytes = 5e6 // minute 2, before the window: the run's start may grow
	if v := JudgeFlat(s, 6*time.Minute, testFlatRule); !v.Flat {
		t.Fatalf("a figure outside the judged window counted: %+v", v)
	}
}

func TestJudgeFlatNeedsALongEnoughRunAndCompleteSamples(t *testing.T) {
	v := JudgeFlat(flatRun()[:4], 4*time.Minute, testFlatRule)
	if v.Judged || !strings.Contains(v.Why, "at least 6m0s") {
		t.Fatalf("a short run: %+v", v)
	}
	s := flatRun()
	s[2].Err = "no leader"
	rule := testFlatRule
	rule.Window = 2 * time.Minute // minute 3 outside the judged window
	if v := JudgeFlat(s, 6*time.Minute, rule); !v.Flat || v.Ref != 4*time.Minute {
		t.Fatalf("the reference is the first complete sample from minute 3: %+v", v)
	}
	s = flatRun()
	s[4].Err = "no snapshot yet"
	if v := JudgeFlat(s, 6*time.Minute, testFlatRule); v.Flat || !strings.Contains(v.Over[0], "could not be had") {
		t.Fatalf("a sample in the window without its figures: %+v", v)
	}
}

func TestParseVmRSS(t *testing.T) {
	got, err := parseVmRSS("Name:\tdexd\nVmPeak:\t  900 kB\nVmRSS:\t   51200 kB\nThreads:\t12\n")
	if err != nil || got != 50<<20 {
		t.Fatalf("VmRSS %d, %v", got, err)
	}
	if _, err := parseVmRSS("Name:\tdexd\n"); err == nil {
		t.Fatal("a status without VmRSS was read")
	}
	if _, err := parseVmRSS("VmRSS:\t12 MB\n"); err == nil {
		t.Fatal("a VmRSS in another unit was read")
	}
}
