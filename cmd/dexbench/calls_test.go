package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCallStatsSumEveryNodeAndDivideBySteps(t *testing.T) {
	before := metrics{
		"n1": {"raft_leader_dispatchLog_count": 10, "raft_replication_appendEntries_rpc_count": 40},
		"n2": {"raft_rpc_appendEntries_storeLogs_count": 5},
	}
	after := metrics{
		"n1": {"raft_leader_dispatchLog_count": 60, "raft_replication_appendEntries_rpc_count": 240},
		"n2": {"raft_rpc_appendEntries_storeLogs_count": 105},
		"n3": {"raft_rpc_appendEntries_storeLogs_count": 999}, // not scraped before: left out
	}
	cs := newCallStats(before, after, procCounts{Reads: 100, Writes: 50}, procCounts{Reads: 1100, Writes: 450})
	cs.perStep(100)
	if got := cs.RaftPerStep["leader log writes"]; got != 0.5 {
		t.Errorf("leader log writes per Step %v; want 0.5", got)
	}
	if got := cs.RaftPerStep["AppendEntries sent"]; got != 2 {
		t.Errorf("AppendEntries sent per Step %v; want 2", got)
	}
	if got := cs.RaftPerStep["follower log writes"]; got != 1 {
		t.Errorf("follower log writes per Step %v; want 1 (n3 had no reading before the run)", got)
	}
	raft, sys := cs.lines()
	if !strings.Contains(raft, "leader log writes 0.50") || sys != "read calls 10.0, write calls 4.0" {
		t.Errorf("lines %q / %q", raft, sys)
	}
}

func TestReadProcCountsSeesThisProcessWrite(t *testing.T) {
	before := readProcCounts(os.Getpid())
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if _, err := f.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	if _, err := os.Stat("/proc/self/io"); err != nil {
		t.Skip("no /proc/self/io on this kernel")
	}
	if d := readProcCounts(os.Getpid()).minus(before); d.Writes < 10 {
		t.Fatalf("10 writes counted as %v", d.Writes)
	}
	if c := readProcCounts(-1); c != (procCounts{}) {
		t.Fatalf("a process that does not exist reads as %+v", c)
	}
}
