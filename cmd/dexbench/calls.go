package main

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
)

// What a Step costs in calls rather than CPU: the raft calls every node
// made and the system calls of every dexd, during the measured run. A
// partitioned cluster's extra CPU is per call, not per entry
// (docs/design/scaling.md), so these say which calls to cut.

// raftCalls are the counts of hashicorp/raft's own timers (their _count
// series on /metrics, every group of a node summed, as raft's metrics
// carry no group), by what the report calls them.
var raftCalls = []struct{ metric, name string }{
	{"raft_leader_dispatchLog_count", "leader log writes"},
	{"raft_rpc_appendEntries_storeLogs_count", "follower log writes"},
	{"raft_replication_appendEntries_rpc_count", "AppendEntries sent"},
	{"raft_replication_heartbeat_count", "heartbeats sent"},
	{"raft_rpc_appendEntries_count", "AppendEntries handled"},
	{"raft_fsm_applyBatch_count", "apply batches"},
}

// isRaftCall says whether scrape keeps a series for the raft calls.
func isRaftCall(name string) bool {
	for _, c := range raftCalls {
		if c.metric == name {
			return true
		}
	}
	return false
}

// callStats are a run's calls, every node summed, and per succeeded Step.
type callStats struct {
	Raft        map[string]float64 `json:"raft"`
	RaftPerStep map[string]float64 `json:"raft_per_step,omitempty"`
	// System calls of the dexd processes: reads and writes (/proc/PID/io's
	// syscr and syscw, every thread's read- and write-like calls, network
	// included).
	Sys        procCounts         `json:"sys"`
	SysPerStep map[string]float64 `json:"sys_per_step,omitempty"`
}

// procCounts are a process's counters that calls leave.
type procCounts struct {
	Reads  float64 `json:"read_calls"`
	Writes float64 `json:"write_calls"`
}

func (a procCounts) minus(b procCounts) procCounts {
	return procCounts{a.Reads - b.Reads, a.Writes - b.Writes}
}

func (a procCounts) plus(b procCounts) procCounts {
	return procCounts{a.Reads + b.Reads, a.Writes + b.Writes}
}

// readProcCounts reads pid's counters; a process gone or a kernel without
// them reads as zero.
func readProcCounts(pid int) procCounts {
	var c procCounts
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/io")
	if err != nil {
		return c
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		switch {
		case err != nil:
		case k == "syscr":
			c.Reads = n
		case k == "syscw":
			c.Writes = n
		}
	}
	return c
}

// sumProcCounts is the counters of every pid, summed.
func sumProcCounts(pids map[string]int) procCounts {
	var sum procCounts
	for _, pid := range pids {
		sum = sum.plus(readProcCounts(pid))
	}
	return sum
}

// newCallStats is the calls between two scrapes and two readings of the
// dexd processes' counters.
func newCallStats(before, after metrics, sys0, sys1 procCounts) *callStats {
	cs := &callStats{Raft: map[string]float64{}, Sys: sys1.minus(sys0)}
	for id, a := range after {
		b := before[id]
		if b == nil {
			continue
		}
		for _, c := range raftCalls {
			cs.Raft[c.name] += a[c.metric] - b[c.metric]
		}
	}
	return cs
}

// perStep divides the counts by the run's succeeded Steps.
func (cs *callStats) perStep(steps int) {
	if steps == 0 {
		return
	}
	per := func(n float64) float64 { return math.Round(n/float64(steps)*100) / 100 }
	cs.RaftPerStep = map[string]float64{}
	for k, n := range cs.Raft {
		cs.RaftPerStep[k] = per(n)
	}
	cs.SysPerStep = map[string]float64{"read calls": per(cs.Sys.Reads), "write calls": per(cs.Sys.Writes)}
}

// lines are the report's two lines of calls per Step.
func (cs *callStats) lines() (raft, sys string) {
	var parts []string
	for _, c := range raftCalls {
		parts = append(parts, fmt.Sprintf("%s %.2f", c.name, cs.RaftPerStep[c.name]))
	}
	raft = strings.Join(parts, ", ")
	sys = fmt.Sprintf("read calls %.1f, write calls %.1f", cs.SysPerStep["read calls"], cs.SysPerStep["write calls"])
	return raft, sys
}
