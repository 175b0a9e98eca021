package soak

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/dexhq/dex/fsm"
)

// The flatness figures of the lifecycle mode: every minute (and at the end
// of the load) the size of the leader's newest raft snapshot, the leader's
// resident memory and the time to restore that snapshot offline into a
// fresh state machine. With sessions created and closed at a steady rate
// and a retention deleting the closed ones, they must stay flat: each
// figure's median over the run's last FlatRule.Window within
// FlatRule.Tolerance of its median around FlatRule.Ref. Medians, not single
// samples: the leader changes under the faults (a node restarted a minute
// ago holds less memory) and a restore timed on a loaded machine varies,
// while what the judgment is for is growth.

// FlatSample is one sampling of the flatness figures.
type FlatSample struct {
	At            time.Duration `json:"at_ns"`
	Node          string        `json:"node,omitempty"` // the leader sampled
	SnapshotBytes int64         `json:"snapshot_bytes"`
	SnapshotIndex uint64        `json:"snapshot_index,omitempty"`
	RSSBytes      int64         `json:"rss_bytes"`
	Restore       time.Duration `json:"restore_ns"`
	RestoreCPU    time.Duration `json:"restore_cpu_ns,omitempty"` // when the restore ran in a process of its own
	Err           string        `json:"err,omitempty"`            // a figure that could not be had
}

// FlatRule is the flatness judgment.
type FlatRule struct {
	// The reference: the complete samples within RefSpan/2 of Ref (with a
	// RefSpan of 0, the first complete sample at or after Ref).
	Ref, RefSpan time.Duration
	Window       time.Duration // the run's last Window is judged
	MinRun       time.Duration // shorter runs are not judged
	Tolerance    float64       // the largest relative distance of the medians
}

// DefaultFlatRule is the goal of the 1-hour soak: the last 15 minutes
// within 10 % of minute 15 (the minutes 13 to 17), for runs of 30 minutes
// or more.
var DefaultFlatRule = FlatRule{Ref: 15 * time.Minute, RefSpan: 5 * time.Minute, Window: 15 * time.Minute, MinRun: 30 * time.Minute, Tolerance: 0.10}

// FlatVerdict is the flatness judgment of a run.
type FlatVerdict struct {
	Judged bool   `json:"judged"`
	Why    string `json:"why,omitempty"` // not judged: why
	Flat   bool   `json:"flat"`
	// Over: the figures out of the tolerance, and samples without figures.
	Over []string `json:"over,omitempty"`
	// Ref and RefTo: the reference's first and last sample times. Worst:
	// each figure's relative distance between the window's median and the
	// reference's; Spread: its largest single sample's distance from the
	// reference's median, for the reader (not judged).
	Ref    time.Duration      `json:"ref_ns,omitempty"`
	RefTo  time.Duration      `json:"ref_to_ns,omitempty"`
	Worst  map[string]float64 `json:"worst,omitempty"`
	Spread map[string]float64 `json:"spread,omitempty"`
}

type flatFigure struct {
	name string
	of   func(FlatSample) float64
}

// flatFigures names the judged figures of samples and reads them from a
// sample. The restore is judged by its CPU time when every complete sample
// has one: the soak's load shares the machine, and a restore's wall time
// moves with that load by half (one snapshot restored ten times beside
// it: 70–143 ms of wall time, 89–118 ms of CPU).
func flatFigures(samples []FlatSample) []flatFigure {
	restore := flatFigure{"restore CPU time", func(s FlatSample) float64 { return float64(s.RestoreCPU) }}
	for _, s := range samples {
		if s.Err == "" && s.RestoreCPU <= 0 {
			restore = flatFigure{"restore time", func(s FlatSample) float64 { return float64(s.Restore) }}
			break
		}
	}
	return []flatFigure{
		{"snapshot bytes", func(s FlatSample) float64 { return float64(s.SnapshotBytes) }},
		{"leader RSS", func(s FlatSample) float64 { return float64(s.RSSBytes) }},
		restore,
	}
}

// JudgeFlat judges samples of a run of length run under rule.
func JudgeFlat(samples []FlatSample, run time.Duration, rule FlatRule) FlatVerdict {
	if run < rule.MinRun {
		return FlatVerdict{Why: fmt.Sprintf("the flatness judgment needs a run of at least %s (this one: %s)", rule.MinRun, run)}
	}
	ref := refSamples(samples, rule)
	if len(ref) == 0 {
		return FlatVerdict{Why: fmt.Sprintf("no complete sample at or after %s", rule.Ref)}
	}
	v := FlatVerdict{Judged: true, Flat: true, Ref: ref[0].At, RefTo: ref[len(ref)-1].At, Worst: map[string]float64{}, Spread: map[string]float64{}}
	var window []FlatSample
	for _, s := range samples {
		if s.At < run-rule.Window {
			continue
		}
		if s.Err != "" {
			v.Flat = false
			v.Over = append(v.Over, fmt.Sprintf("at %s the figures could not be had: %s", s.At.Round(time.Second), s.Err))
			continue
		}
		window = append(window, s)
	}
	if len(window) == 0 {
		v.Flat = false
		v.Over = append(v.Over, fmt.Sprintf("no complete sample in the last %s", rule.Window))
		return v
	}
	for _, f := range flatFigures(samples) {
		want, got := median(ref, f.of), median(window, f.of)
		d := relDist(got, want)
		v.Worst[f.name] = d
		for _, s := range window {
			v.Spread[f.name] = max(v.Spread[f.name], relDist(f.of(s), want))
		}
		if d > rule.Tolerance {
			v.Flat = false
			v.Over = append(v.Over, fmt.Sprintf("%s: the median of the last %s (%d samples) is %.0f%% from the reference's (%s–%s, %d samples): %s against %s",
				f.name, rule.Window, len(window), 100*d, v.Ref.Round(time.Second), v.RefTo.Round(time.Second), len(ref), figure(f.name, got), figure(f.name, want)))
		}
	}
	return v
}

// refSamples returns the complete samples of the rule's reference.
func refSamples(samples []FlatSample, rule FlatRule) []FlatSample {
	var out []FlatSample
	for _, s := range samples {
		if s.Err != "" {
			continue
		}
		if rule.RefSpan == 0 {
			if s.At >= rule.Ref {
				return []FlatSample{s}
			}
			continue
		}
		if s.At >= rule.Ref-rule.RefSpan/2 && s.At <= rule.Ref+rule.RefSpan/2 {
			out = append(out, s)
		}
	}
	return out
}

// median is the median of a figure over samples (the mean of the middle
// two of an even count).
func median(samples []FlatSample, of func(FlatSample) float64) float64 {
	vs := make([]float64, len(samples))
	for i, s := range samples {
		vs[i] = of(s)
	}
	slices.Sort(vs)
	n := len(vs)
	if n%2 == 1 {
		return vs[n/2]
	}
	return (vs[n/2-1] + vs[n/2]) / 2
}

// figure prints a figure's value in its unit.
func figure(name string, v float64) string {
	switch name {
	case "leader RSS":
		return fmt.Sprintf("%.1f MiB", v/(1<<20))
	case "restore time", "restore CPU time":
		return time.Duration(v).Round(time.Millisecond).String()
	}
	return fmt.Sprintf("%.0f bytes", v)
}

func relDist(got, ref float64) float64 {
	if ref == 0 {
		if got == 0 {
			return 0
		}
		return math.Inf(1)
	}
	return math.Abs(got-ref) / ref
}

// sampleFlat samples the flatness figures on the current leader. With
// several partitions these are partition 0's: WaitReady returns its
// leader, and the node's raft dir, where the restore reads the newest
// snapshot, holds partition 0's stores (the others' are below it).
func (s *soaker) sampleFlat(ctx context.Context, at time.Duration) FlatSample {
	out := FlatSample{At: at}
	lctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	l, err := s.cluster.WaitReady(lctx)
	if err != nil {
		out.Err = "no leader: " + err.Error()
		return out
	}
	out.Node = l.ID
	var errs []string
	if out.RSSBytes, err = rssBytes(l.PID()); err != nil {
		errs = append(errs, err.Error())
	}
	// A sample begun finishes when the load ends under it.
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer rcancel()
	restore, err := s.o.RestoreTimer(rctx, l.DataDir)
	if err != nil {
		errs = append(errs, err.Error())
	}
	out.SnapshotBytes, out.SnapshotIndex, out.Restore, out.RestoreCPU = restore.Size, restore.Index, restore.Took, restore.CPU
	out.Err = strings.Join(errs, "; ")
	return out
}

// rssBytes reads a process's resident set size from /proc.
func rssBytes(pid int) (int64, error) {
	if pid == 0 {
		return 0, errors.New("the leader's process is not running")
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return parseVmRSS(string(b))
}

func parseVmRSS(status string) (int64, error) {
	for _, line := range strings.Split(status, "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) != 2 || f[1] != "kB" {
				return 0, fmt.Errorf("unreadable VmRSS line %q", line)
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS line")
}

// RestoreTries: the restore time is the shortest of this many restores,
// so that a CPU busy with the load for a moment does not count.
const RestoreTries = 5

// RestoreNewest restores a node's newest raft snapshot offline (the node
// may run: its snapshot files are only read) and times it.
func RestoreNewest(dataDir string) (size int64, index uint64, took time.Duration, err error) {
	snaps, m, err := newestSnapshot(dataDir)
	if err != nil {
		return 0, 0, 0, err
	}
	for i := 0; i < RestoreTries; i++ {
		d, err := timeRestore(snaps, m.ID)
		if err != nil {
			return m.Size, m.Index, 0, err
		}
		if i == 0 || d < took {
			took = d
		}
	}
	return m.Size, m.Index, took, nil
}

// newestSnapshot opens a node's snapshot store for reading and finds its
// newest snapshot.
func newestSnapshot(dataDir string) (*raft.FileSnapshotStore, *raft.SnapshotMeta, error) {
	snaps, err := raft.NewFileSnapshotStore(filepath.Join(dataDir, "raft"), 2, io.Discard)
	if err != nil {
		return nil, nil, err
	}
	metas, err := snaps.List()
	if err != nil {
		return nil, nil, err
	}
	if len(metas) == 0 {
		return nil, nil, fmt.Errorf("%s has no snapshot yet", dataDir)
	}
	return snaps, metas[0], nil
}

func timeRestore(snaps *raft.FileSnapshotStore, id string) (time.Duration, error) {
	start := time.Now()
	_, rc, err := snaps.Open(id)
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	if err := fsm.New(fsm.Options{}).Restore(rc); err != nil {
		return 0, fmt.Errorf("snapshot %s does not restore: %w", id, err)
	}
	return time.Since(start), nil
}

// sampleEveryMinute samples until ctx ends.
func (s *soaker) sampleEveryMinute(ctx context.Context, start time.Time, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sm := s.sampleFlat(ctx, time.Since(start))
		s.addFlat(sm)
		fmt.Fprintf(s.o.Progress, "soak: %s flatness: %s\n", sm.At.Round(time.Second), sm.line())
	}
}

func (s *soaker) addFlat(sm FlatSample) {
	s.smu.Lock()
	s.flat = append(s.flat, sm)
	s.smu.Unlock()
}

func (sm FlatSample) line() string {
	if sm.Err != "" && sm.Node == "" {
		return sm.Err
	}
	l := fmt.Sprintf("leader %s, snapshot %d bytes (index %d), RSS %.1f MiB, restore %s", sm.Node, sm.SnapshotBytes, sm.SnapshotIndex, float64(sm.RSSBytes)/(1<<20), sm.Restore.Round(time.Millisecond))
	if sm.RestoreCPU > 0 {
		l += fmt.Sprintf(" (CPU %s)", sm.RestoreCPU.Round(time.Millisecond))
	}
	if sm.Err != "" {
		l += " (" + sm.Err + ")"
	}
	return l
}

// flatMarkdown writes the figures' table and the judgment.
func (rep *Report) flatMarkdown(b *strings.Builder) {
	if rep.Lifecycle == nil {
		return
	}
	b.WriteString("\n### Flatness\n\n| at | leader | snapshot bytes | snapshot index | leader RSS (MiB) | restore time | restore CPU time | note |\n|---|---|---|---|---|---|---|---|\n")
	for _, sm := range rep.Lifecycle.Flat {
		cpu := "-"
		if sm.RestoreCPU > 0 {
			cpu = sm.RestoreCPU.Round(time.Millisecond).String()
		}
		fmt.Fprintf(b, "| %s | %s | %d | %d | %.1f | %s | %s | %s |\n", sm.At.Round(time.Second), orDash(sm.Node), sm.SnapshotBytes, sm.SnapshotIndex,
			float64(sm.RSSBytes)/(1<<20), sm.Restore.Round(time.Millisecond), cpu, orDash(cell(sm.Err)))
	}
	v := rep.Lifecycle.FlatVerdict
	switch {
	case !v.Judged:
		fmt.Fprintf(b, "\nFlatness not judged: %s.\n", v.Why)
	case v.Flat:
		fmt.Fprintf(b, "\n**Flat**: the medians of the judged window within the tolerance of those of %s–%s (distances: %s; largest single sample: %s).\n",
			v.Ref.Round(time.Second), v.RefTo.Round(time.Second), worstLine(v.Worst), worstLine(v.Spread))
	default:
		fmt.Fprintf(b, "\n**Not flat** against the medians of %s–%s (distances: %s; largest single sample: %s):\n\n",
			v.Ref.Round(time.Second), v.RefTo.Round(time.Second), worstLine(v.Worst), worstLine(v.Spread))
		for _, o := range v.Over {
			fmt.Fprintf(b, "- %s\n", o)
		}
	}
}

func worstLine(w map[string]float64) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(w)) {
		parts = append(parts, fmt.Sprintf("%s %.0f%%", k, 100*w[k]))
	}
	return strings.Join(parts, ", ")
}

// NotFlat reports whether the flatness was judged and failed.
func (rep *Report) NotFlat() bool {
	return rep.Lifecycle != nil && rep.Lifecycle.FlatVerdict.Judged && !rep.Lifecycle.FlatVerdict.Flat
}

func (rep *Report) lifecycleSummary(b *strings.Builder) {
	l := rep.Lifecycle
	if l == nil {
		return
	}
	c := rep.Check.Lifecycle
	if c == nil {
		c = &LifecycleCounts{}
	}
	fmt.Fprintf(b, "lifecycle: retention %s: %d sessions closed (%d seen closed, %d exported), %d deleted", l.Retention, c.Closed, c.SeenClosed, c.Exported, c.Deleted)
	if l.Archive {
		fmt.Fprintf(b, "; archive: %d objects, %d due, %d compared byte for byte with the export", c.Archived, c.ArchiveDue, c.ArchiveSameAs)
	}
	b.WriteString("\n")
	v := l.FlatVerdict
	switch {
	case !v.Judged:
		fmt.Fprintf(b, "flatness: %d samples; not judged: %s\n", len(l.Flat), v.Why)
	case v.Flat:
		fmt.Fprintf(b, "flatness: FLAT (%d samples; the last window's medians against %s–%s's: %s)\n", len(l.Flat), v.Ref.Round(time.Second), v.RefTo.Round(time.Second), worstLine(v.Worst))
	default:
		fmt.Fprintf(b, "flatness: NOT FLAT (%d samples; the last window's medians against %s–%s's: %s)\n", len(l.Flat), v.Ref.Round(time.Second), v.RefTo.Round(time.Second), worstLine(v.Worst))
	}
}

func (rep *Report) lifecycleMarkdown(b *strings.Builder) {
	l := rep.Lifecycle
	if l == nil {
		return
	}
	c := rep.Check.Lifecycle
	if c == nil {
		c = &LifecycleCounts{}
	}
	b.WriteString("\n### Lifecycle\n\n")
	fmt.Fprintf(b, "Sessions closed throughout; the nodes delete a closed session %s after it closed", l.Retention)
	if l.Archive {
		b.WriteString(", after writing it to the archive")
	}
	b.WriteString(".\n\n")
	fmt.Fprintf(b, "- closes acknowledged: %d; seen closed: %d; exported through the API once closed: %d\n", c.Closed, c.SeenClosed, c.Exported)
	fmt.Fprintf(b, "- sessions seen gone after they existed: %d, each judged against its close and the retention (%d deleted before an export was had)\n", c.Deleted, c.NotExported)
	if l.Archive {
		fmt.Fprintf(b, "- archive: %d objects; %d sessions had to be in it (deleted, or closed more than the retention and %s before the final reads); %d compared byte for byte with their export\n", c.Archived, c.ArchiveDue, archiveSlack, c.ArchiveSameAs)
	}
	rep.flatMarkdown(b)
}
