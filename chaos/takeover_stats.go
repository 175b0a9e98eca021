package chaos

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Spread is the median, p99 and max of a set of durations.
type Spread struct {
	Median, P99, Max time.Duration
	N                int
}

// SpreadOf computes the spread; p99 is the nearest-rank percentile, so
// with fewer than 100 samples it is the max.
func SpreadOf(ds []time.Duration) Spread {
	if len(ds) == 0 {
		return Spread{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := func(p float64) time.Duration {
		i := int(p*float64(len(s))+0.999999) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return Spread{Median: med, P99: rank(0.99), Max: s[len(s)-1], N: len(s)}
}

func (s Spread) String() string {
	return fmt.Sprintf("median %d ms, p99 %d ms, max %d ms", s.Median.Milliseconds(), s.P99.Milliseconds(), s.Max.Milliseconds())
}

// Summary lines of a measurement: the two spreads and the model calls.
func (r *TakeoverResult) Summary() []string {
	var ready, idle []time.Duration
	for _, k := range r.Kills {
		ready = append(ready, k.Ready)
		idle = append(idle, k.Idle)
	}
	lines := []string{
		fmt.Sprintf("%-7s kill → a node's /readyz/leader 200:        %s over %d kills", r.Target, SpreadOf(ready), len(ready)),
		fmt.Sprintf("%-7s kill → the new session idle:         %s over %d kills", r.Target, SpreadOf(idle), len(idle)),
	}
	if len(r.Others) > 0 {
		lines[0] = fmt.Sprintf("%-7s kill → the partition's new leader:    %s over %d kills", r.Target, SpreadOf(ready), len(ready))
		lines = append(lines, otherSummary(r.Target, r.Others))
	}
	if r.Sessions > 0 { // the ledger is read once every kill is done
		lines = append(lines, fmt.Sprintf("%-7s repeated model calls: %d (%d model calls in %d sessions; an uninterrupted session makes %d)",
			r.Target, r.RepeatedModelCalls, r.ModelCalls, r.Sessions, r.BaselineModelCalls))
	}
	return lines
}

// CPUSample is the machine's CPU time from /proc/stat: how busy the whole
// machine is (every process), as chaos/scripts/busy.sh reports it.
type CPUSample struct {
	total, idle uint64
	at          time.Time
}

// SampleCPU reads /proc/stat; ok is false where there is none.
func SampleCPU() (s CPUSample, ok bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return s, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return s, false
	}
	// user nice system idle iowait irq softirq steal, as busy.sh sums them.
	for i, v := range f[1:9] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return s, false
		}
		s.total += n
		if i == 3 || i == 4 {
			s.idle += n
		}
	}
	s.at = time.Now()
	return s, true
}

// BusySince is the line busy.sh prints: how busy the machine was since s.
func BusySince(s CPUSample, cpus int) string {
	e, ok := SampleCPU()
	if !ok || e.total <= s.total {
		return "machine busy: unknown"
	}
	t, idle := e.total-s.total, e.idle-s.idle
	return fmt.Sprintf("machine busy: %.1f %% of %d CPUs over %.1f s", 100*float64(t-idle)/float64(t), cpus, e.at.Sub(s.at).Seconds())
}
