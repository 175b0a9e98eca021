package main

import (
	"bufio"
	"math"
	"os"
	"strconv"
	"strings"
)

// procMem is one process's memory from /proc/PID/status, in bytes.
type procMem struct {
	RSS int64 `json:"rss_bytes"` // VmRSS: resident now
	HWM int64 `json:"hwm_bytes"` // VmHWM: the most resident so far
}

// memSample is every node's memory at one moment of the run.
type memSample struct {
	Moment string             `json:"moment"`
	Nodes  map[string]procMem `json:"nodes"`
}

// readProcMem reads VmRSS and VmHWM of pid (zero when it cannot).
func readProcMem(pid int) procMem {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return procMem{}
	}
	defer f.Close()
	var m procMem
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		// "   123456 kB"
		num, unit, _ := strings.Cut(strings.TrimSpace(v), " ")
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil || unit != "kB" {
			continue
		}
		if k == "VmRSS" {
			m.RSS = n * 1024
		} else {
			m.HWM = n * 1024
		}
	}
	return m
}

// sampleMemory reads the memory of every node, pids by node id.
func sampleMemory(moment string, pids map[string]int) memSample {
	s := memSample{Moment: moment, Nodes: map[string]procMem{}}
	for id, pid := range pids {
		s.Nodes[id] = readProcMem(pid)
	}
	return s
}

// growthPerSession is (after − before) / n of node's RSS, in bytes.
func growthPerSession(before, after memSample, node string, n int) float64 {
	b, okB := before.Nodes[node]
	a, okA := after.Nodes[node]
	if n <= 0 || !okB || !okA || b.RSS == 0 || a.RSS == 0 {
		return 0
	}
	return math.Round(float64(a.RSS-b.RSS)/float64(n)*10) / 10
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
