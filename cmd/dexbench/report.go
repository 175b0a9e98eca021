package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// dist is a latency distribution in milliseconds.
type dist struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean_ms"`
	P50  float64 `json:"p50_ms"`
	P90  float64 `json:"p90_ms"`
	P99  float64 `json:"p99_ms"`
	Max  float64 `json:"max_ms"`
}

func newDist(v []float64) *dist {
	if len(v) == 0 {
		return &dist{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	// Nearest rank.
	q := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	sum := 0.0
	for _, x := range s {
		sum += x
	}
	r := func(x float64) float64 { return math.Round(x*10) / 10 }
	return &dist{N: len(s), Mean: r(sum / float64(len(s))), P50: r(q(0.50)), P90: r(q(0.90)), P99: r(q(0.99)), Max: r(s[len(s)-1])}
}

type machine struct {
	NProc     int    `json:"nproc"`
	CPU       string `json:"cpu"`
	GoVersion string `json:"go_version"`
	OS        string `json:"os"`
}

type config struct {
	Sessions     int `json:"sessions"`
	Workers      int `json:"workers"`
	Concurrency  int `json:"concurrency_per_worker"`
	ToolsPerTurn int `json:"tools_per_turn"`
	Nodes        int `json:"nodes"`
	Partitions   int `json:"partitions"`
	// Sequential: the measured sessions ran one after another, not at once.
	Sequential   bool `json:"sequential"`
	IdleSessions int  `json:"idle_sessions"`
	// Bytes of filler in every model output's text and tool result.
	PayloadBytes int `json:"payload_bytes"`
	// --fairness-keys: the sessions' fairness keys (round robin); 0: no key.
	// Priorities: with --priorities, priorities 1 to 5 (else all 3).
	FairnessKeys int  `json:"fairness_keys"`
	Priorities   bool `json:"priorities"`
}

type raftStats struct {
	// Entries committed on the leader during the measured run.
	Entries        float64 `json:"entries"`
	EntriesPerSec  float64 `json:"entries_per_sec"`
	EntriesPerStep float64 `json:"entries_per_step"`
	// CPU seconds each node used during the run, by node id.
	CPUSeconds map[string]float64 `json:"cpu_seconds"`
	// Forwarded is the calls the nodes of a partitioned cluster forwarded
	// to a partition's leader during the run, all nodes summed.
	Forwarded        float64 `json:"forwarded_calls"`
	ForwardedPerStep float64 `json:"forwarded_calls_per_step"`
	// Calls are the raft and system calls of the run (calls.go).
	Calls *callStats `json:"calls,omitempty"`
}

type report struct {
	Machine machine `json:"machine"`
	Config  config  `json:"config"`
	Leader  string  `json:"leader"`
	PIDs    []int   `json:"pids"`

	WallSeconds     float64        `json:"wall_seconds"`
	SessionsIdle    int            `json:"sessions_idle"`
	SessionsFailed  int            `json:"sessions_not_idle"`
	Steps           int            `json:"steps"`
	StepsSucceeded  int            `json:"steps_succeeded"`
	StepsByKind     map[string]int `json:"steps_by_kind"`
	Attempts        int            `json:"attempts"`
	StepsPerSec     float64        `json:"steps_per_sec"`
	SessionsPerSec  float64        `json:"sessions_per_sec"`
	MissingArrivals int            `json:"missing_arrivals"`

	// Queued (ReadyAtMs, leader clock) → the Worker holds the task.
	Dispatch *dist `json:"dispatch_latency"`
	// Queued → the handler starts (after the claim committed).
	QueuedToHandler *dist `json:"queued_to_handler"`
	// Parts of the dispatch latency.
	QueueToStart  *dist `json:"queued_to_start_proposed"`
	StartToHeld   *dist `json:"start_proposed_to_held"`
	HeldToHandler *dist `json:"held_to_handler"`
	// One CreateSession call (with its first message), as the client saw it.
	Create *dist `json:"create_session_call"`
	// Session created → its last Step ended (leader clock).
	Turn *dist `json:"turn_latency"`

	Raft           *raftStats `json:"raft,omitempty"`
	Fsync          *dist      `json:"fsync_probe,omitempty"`
	WorkerWarnings int64      `json:"worker_warnings"`
	// Busy share (%) of all CPUs during the run and its CPU seconds,
	// every process of the machine counted (other load included).
	MachineBusy           float64 `json:"machine_busy_pct"`
	MachineBusyCPUSeconds float64 `json:"machine_busy_cpu_seconds"`
	// CPU per succeeded Step: every dexd's and dexbench's CPU seconds, and
	// the machine's busy CPU seconds (other load included), ÷ Steps, in ms.
	CPUMsPerStep         float64 `json:"cpu_ms_per_step"`
	MachineBusyMsPerStep float64 `json:"machine_busy_ms_per_step"`

	// The --steady run after the measured one.
	Steady *steadyLoad `json:"steady_load,omitempty"`
	// The idle sessions loaded before the warm-up (--idle-sessions).
	IdleLoad *idleLoad `json:"idle_load,omitempty"`
	// Pages of the sessions list read after the idle load (--list-pages).
	List *listReport `json:"list,omitempty"`
	// Every node's memory after the cluster is ready, after the idle load
	// and at the end.
	Memory []memSample `json:"memory"`
	// Leader RSS growth from ready to after the idle load ÷ idle sessions.
	RSSPerIdleSession float64 `json:"rss_bytes_per_idle_session,omitempty"`
	Error             string  `json:"error,omitempty"`
}

func thisMachine() machine {
	return machine{NProc: runtime.NumCPU(), CPU: cpuModel(), GoVersion: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH}
}

func newReport(o options) *report {
	return &report{
		Machine: thisMachine(),
		Config: config{Sessions: o.sessions, Workers: o.workers, Concurrency: o.concurrency, ToolsPerTurn: o.toolsPerTurn, Nodes: 3, Partitions: max(o.partitions, 1),
			Sequential: o.sequential > 0, IdleSessions: o.idleSessions, PayloadBytes: int(o.payload), FairnessKeys: o.fairnessKeys, Priorities: o.priorities},
	}
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

func unixMs(t time.Time) float64 { return float64(t.UnixMicro()) / 1000 }

// analyse fills the figures from the sessions' Steps and the Workers'
// arrival times.
func (r *report) analyse(sessions []*dexv1.GetSessionResponse, rec *recorder, start, end time.Time) {
	wall := end.Sub(start).Seconds()
	r.WallSeconds = math.Round(wall*1000) / 1000
	r.StepsByKind = map[string]int{}
	var dispatch, toHandler, queueToStart, startToHeld, heldToHandler, turn []float64
	for _, gs := range sessions {
		s := gs.GetSession()
		if s.GetStatus() == dexv1.SessionStatus_SESSION_STATUS_IDLE && s.GetTurnsCompleted() > 0 {
			r.SessionsIdle++
		} else {
			r.SessionsFailed++
		}
		var last int64
		for _, st := range gs.Steps {
			r.Steps++
			r.StepsByKind[strings.TrimPrefix(st.Kind.String(), "STEP_KIND_")]++
			r.Attempts += len(st.Attempts)
			if st.Outcome == dexv1.Outcome_OUTCOME_SUCCEEDED {
				r.StepsSucceeded++
			}
			last = max(last, st.EndedAtMs)
			if len(st.Attempts) == 0 {
				continue
			}
			at := st.Attempts[len(st.Attempts)-1]
			queued := float64(st.ReadyAtMs)
			queueToStart = append(queueToStart, float64(at.StartedAtMs)-queued)
			a := rec.get(st.Id)
			if a == nil || a.attempt != at.N {
				r.MissingArrivals++
				continue
			}
			dispatch = append(dispatch, unixMs(a.held)-queued)
			startToHeld = append(startToHeld, unixMs(a.held)-float64(at.StartedAtMs))
			if !a.handler.IsZero() {
				toHandler = append(toHandler, unixMs(a.handler)-queued)
				heldToHandler = append(heldToHandler, ms(a.handler.Sub(a.held)))
			}
		}
		if last > 0 && s.GetCreatedAtMs() > 0 {
			turn = append(turn, float64(last-s.GetCreatedAtMs()))
		}
	}
	if wall > 0 {
		r.StepsPerSec = math.Round(float64(r.StepsSucceeded)/wall*10) / 10
		r.SessionsPerSec = math.Round(float64(r.SessionsIdle)/wall*10) / 10
	}
	r.Dispatch, r.QueuedToHandler = newDist(dispatch), newDist(toHandler)
	r.QueueToStart, r.StartToHeld, r.HeldToHandler = newDist(queueToStart), newDist(startToHeld), newDist(heldToHandler)
	r.Turn = newDist(turn)
	if r.Raft != nil && r.StepsSucceeded > 0 {
		r.Raft.EntriesPerStep = math.Round(r.Raft.Entries/float64(r.StepsSucceeded)*100) / 100
		r.Raft.ForwardedPerStep = math.Round(r.Raft.Forwarded/float64(r.StepsSucceeded)*100) / 100
		if r.Raft.Calls != nil {
			r.Raft.Calls.perStep(r.StepsSucceeded)
		}
	}
	r.setCPUPerStep()
}

// setCPUPerStep divides the CPU seconds of the run by its succeeded Steps.
func (r *report) setCPUPerStep() {
	if r.StepsSucceeded == 0 {
		return
	}
	if r.Raft != nil {
		r.CPUMsPerStep = perOpMs(sumValues(r.Raft.CPUSeconds), r.StepsSucceeded)
	}
	r.MachineBusyMsPerStep = perOpMs(r.MachineBusyCPUSeconds, r.StepsSucceeded)
}

// perOpMs is CPU seconds ÷ n operations, in ms, to two decimals.
func perOpMs(cpuSeconds float64, n int) float64 {
	if n <= 0 {
		return 0
	}
	return math.Round(cpuSeconds/float64(n)*1000*100) / 100
}

func sumValues(m map[string]float64) float64 {
	sum := 0.0
	for _, v := range m {
		sum += v
	}
	return sum
}

// metrics are the gauges of every node's /metrics, by node id.
type metrics map[string]map[string]float64

// scrape reads the gauges dexbench uses from every node's /metrics.
func scrape(nodes map[string]string) metrics {
	out := metrics{}
	hc := &http.Client{Timeout: 2 * time.Second}
	for id, addr := range nodes {
		resp, err := hc.Get("http://" + addr + "/metrics")
		if err != nil {
			continue
		}
		m := map[string]float64{}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "#") {
				continue
			}
			name, val, ok := strings.Cut(line, " ")
			if !ok {
				continue
			}
			// A node of several partitions labels each partition's
			// series: the node's figure is their sum (entries committed,
			// elections, partitions led).
			name, _, _ = strings.Cut(name, "{")
			switch name {
			case "dex_raft_commit_index", "process_cpu_seconds_total", "dex_raft_term", "dex_epoch", "dex_ready", "dex_forwarded_calls_total":
			default:
				if !isRaftCall(name) {
					continue
				}
			}
			if f, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
				m[name] += f
			}
		}
		resp.Body.Close()
		out[id] = m
	}
	return out
}

func (r *report) setRaft(before, after metrics, leader string, wall time.Duration) {
	rs := &raftStats{CPUSeconds: map[string]float64{}}
	if b, a := before[leader], after[leader]; b != nil && a != nil {
		rs.Entries = a["dex_raft_commit_index"] - b["dex_raft_commit_index"]
		if wall > 0 {
			rs.EntriesPerSec = math.Round(rs.Entries/wall.Seconds()*10) / 10
		}
	}
	for id, a := range after {
		if b := before[id]; b != nil {
			rs.CPUSeconds[id] = math.Round((a["process_cpu_seconds_total"]-b["process_cpu_seconds_total"])*100) / 100
			rs.Forwarded += a["dex_forwarded_calls_total"] - b["dex_forwarded_calls_total"]
		}
	}
	r.Raft = rs
}

func (r *report) writeJSON(w io.Writer) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(r)
}

func (r *report) writeTable(w io.Writer) {
	how := "at once"
	if r.Config.Sequential {
		how = "one after another"
	}
	fmt.Fprintf(w, "dexbench: %d sessions %s, %d idle sessions beside them, %d Workers x %d, %d noop calls per turn, payload %d B, %d dexd nodes (fsync on), %d partition(s), leader %s\n",
		r.Config.Sessions, how, r.Config.IdleSessions, r.Config.Workers, r.Config.Concurrency, r.Config.ToolsPerTurn, r.Config.PayloadBytes, r.Config.Nodes, r.Config.Partitions, r.Leader)
	if r.Config.FairnessKeys > 0 {
		prio := "priority 3"
		if r.Config.Priorities {
			prio = "a priority from 1 to 5"
		}
		fmt.Fprintf(w, "flow control: every session has one of %d fairness keys (weight 1) and %s\n", r.Config.FairnessKeys, prio)
	}
	fmt.Fprintf(w, "machine: %d CPU, %s, %s %s\n\n", r.Machine.NProc, r.Machine.CPU, r.Machine.GoVersion, r.Machine.OS)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "wall time\t%.2f s\t(first CreateSession → last session idle)\n", r.WallSeconds)
	fmt.Fprintf(tw, "sessions idle\t%d / %d\t%.1f sessions/s\n", r.SessionsIdle, r.SessionsIdle+r.SessionsFailed, r.SessionsPerSec)
	kinds := make([]string, 0, len(r.StepsByKind))
	for k, n := range r.StepsByKind {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
	}
	slices.Sort(kinds)
	fmt.Fprintf(tw, "steps succeeded\t%d / %d\t%.1f steps/s  (%s; %d attempts)\n", r.StepsSucceeded, r.Steps, r.StepsPerSec, strings.Join(kinds, ", "), r.Attempts)
	if r.Raft != nil {
		var cpu []string
		for id, s := range r.Raft.CPUSeconds {
			cpu = append(cpu, fmt.Sprintf("%s %.2f", id, s))
		}
		slices.Sort(cpu)
		fmt.Fprintf(tw, "raft entries\t%.0f\t%.1f entries/s, %.2f per succeeded Step\n", r.Raft.Entries, r.Raft.EntriesPerSec, r.Raft.EntriesPerStep)
		fmt.Fprintf(tw, "CPU seconds\t%s\t(during the run; dexbench = Workers + client)\n", strings.Join(cpu, ", "))
		if r.Raft.Calls != nil && r.Raft.Calls.RaftPerStep != nil {
			raft, sys := r.Raft.Calls.lines()
			fmt.Fprintf(tw, "raft calls per Step\t%s\t(every node, every partition)\n", raft)
			fmt.Fprintf(tw, "system calls per Step\t%s\t(the dexd processes)\n", sys)
		}
		if r.Config.Partitions > 1 {
			fmt.Fprintf(tw, "forwarded calls\t%.0f\t%.2f per succeeded Step (calls a node passed on to their partition's leader)\n", r.Raft.Forwarded, r.Raft.ForwardedPerStep)
		}
	}
	if r.MachineBusyCPUSeconds > 0 {
		fmt.Fprintf(tw, "machine busy\t%.1f%%\t%.2f CPU seconds, every process counted (compare with the line above)\n", r.MachineBusy, r.MachineBusyCPUSeconds)
	}
	if r.CPUMsPerStep > 0 {
		fmt.Fprintf(tw, "CPU per Step\t%.2f ms\t(the CPU seconds above ÷ succeeded Steps; machine busy: %.2f ms per Step)\n", r.CPUMsPerStep, r.MachineBusyMsPerStep)
	}
	if l := r.IdleLoad; l != nil {
		fmt.Fprintf(tw, "idle load\t%d sessions\t%.2f s in batches of %d, %.1f sessions/s, %.0f raft entries (%.2f per session)\n",
			l.Sessions, l.Seconds, l.Batch, l.SessionsPerSec, l.Entries, l.Entries/float64(max(l.Sessions, 1)))
	}
	fmt.Fprintf(tw, "worker warnings\t%d\t\n", r.WorkerWarnings)
	if r.MissingArrivals > 0 {
		fmt.Fprintf(tw, "missing arrivals\t%d\t(Steps whose last attempt no Worker here recorded)\n", r.MissingArrivals)
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "latency (ms)\tn\tp50\tp90\tp99\tmax\tmean\t")
	row := func(name string, d *dist) {
		if d == nil || d.N == 0 {
			return
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t\n", name, d.N, d.P50, d.P90, d.P99, d.Max, d.Mean)
	}
	row("dispatch: queued → Worker holds task", r.Dispatch)
	row("  queued → StartAttempt proposed", r.QueueToStart)
	row("  StartAttempt proposed → held", r.StartToHeld)
	row("queued → handler runs (after claim)", r.QueuedToHandler)
	row("  held → handler (claim commit)", r.HeldToHandler)
	row("turn: session created → idle", r.Turn)
	row("CreateSession call (client)", r.Create)
	row("fsync probe: 4 KiB write+fsync", r.Fsync)
	tw.Flush()
	r.writeMemory(w)
	if r.Steady != nil {
		fmt.Fprintln(w)
		r.Steady.write(w)
	}
	if r.Error != "" {
		fmt.Fprintf(w, "\nerror: %s\n", r.Error)
	}
}

// writeMemory prints every node's RSS and VmHWM at each moment sampled.
func (r *report) writeMemory(w io.Writer) {
	if len(r.Memory) == 0 {
		return
	}
	ids := make([]string, 0, len(r.Memory[0].Nodes))
	for id := range r.Memory[0].Nodes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "memory: RSS / HWM (MiB)\t%s\t\n", strings.Join(ids, "\t"))
	for _, m := range r.Memory {
		var cells []string
		for _, id := range ids {
			n := m.Nodes[id]
			cells = append(cells, fmt.Sprintf("%.1f / %.1f", mib(n.RSS), mib(n.HWM)))
		}
		fmt.Fprintf(tw, "%s\t%s\t\n", strings.ReplaceAll(m.Moment, "_", " "), strings.Join(cells, "\t"))
	}
	tw.Flush()
	if r.IdleLoad != nil {
		fmt.Fprintf(w, "RSS per idle session: %.0f B on the leader %s ((after idle load − after ready) ÷ %d)\n", r.RSSPerIdleSession, r.Leader, r.IdleLoad.Sessions)
		printList(w, r.List, r.IdleLoad.Sessions)
	}
}
