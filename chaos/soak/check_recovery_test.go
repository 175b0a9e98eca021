package soak

import (
	"slices"
	"strings"
	"testing"

	"github.com/dexhq/dex/cluster"
)

// Every node kept two snapshots that restore, came back and caught up.
func cleanRestart() *RestartCheck {
	rc := &RestartCheck{Sessions: 1}
	for _, n := range []string{"n1", "n2", "n3"} {
		rc.Nodes = append(rc.Nodes, NodeRestart{Node: n, Index: 42, Took: 1e9,
			Snapshots: []cluster.SnapshotRestore{{ID: "2-40-1", Index: 40}, {ID: "2-20-1", Index: 20}}})
	}
	return rc
}

func TestCheckCountsTheRestartAndTheBackups(t *testing.T) {
	c := Check(cleanInput()).Checked
	if c.Restarted != 3 || c.Snapshots != 6 || c.Backups != 2 {
		t.Fatalf("checked %+v", c)
	}
}

func TestCheckReportsASnapshotThatDoesNotRestore(t *testing.T) {
	in := cleanInput()
	in.Restart.Nodes[1].Snapshots[0].Err = "record 15: message size 4320621 exceeded the maximum 4194304"
	res := Check(in)
	if got := kinds(res.Violations); !slices.Equal(got, []string{VRestart}) || !strings.Contains(res.Violations[0].Detail, "n2's snapshot 2-40-1") {
		t.Fatalf("violations %+v, want one %s naming n2's snapshot", res.Violations, VRestart)
	}
}

func TestCheckReportsANodeThatDidNotComeBack(t *testing.T) {
	in := cleanInput()
	in.Restart.Nodes[2].Err = "exited after the restart (exit status 1)"
	if got := kinds(Check(in).Violations); !slices.Equal(got, []string{VRestart}) {
		t.Fatalf("violations %v, want only %s", got, VRestart)
	}
	in = cleanInput()
	in.Restart.Nodes[0].NotKept, in.Restart.Nodes[0].NotKeptLine = 2, `{"msg":"failed to take snapshot","error":"the snapshot does not read back"}`
	if got := kinds(Check(in).Violations); !slices.Equal(got, []string{VRestart}) {
		t.Fatalf("violations %v, want only %s", got, VRestart)
	}
	in = cleanInput()
	in.Restart.Served = "1 differences over 1 sessions: s1: history entry 3 is missing"
	if got := kinds(Check(in).Violations); !slices.Equal(got, []string{VRestart}) {
		t.Fatalf("violations %v, want only %s", got, VRestart)
	}
}

func TestCheckReportsABackupThatDoesNotRestore(t *testing.T) {
	for _, stage := range []string{BackupSave, BackupInspect, BackupRestore, BackupServe} {
		in := cleanInput()
		in.Backups[1].Stage, in.Backups[1].Err = stage, "it failed"
		if got := kinds(Check(in).Violations); !slices.Equal(got, []string{VBackup}) {
			t.Errorf("%s: violations %v, want only %s", stage, got, VBackup)
		}
	}
}

// What the checks after the soak could not do is said, never passed over.
func TestCheckReportsARecoveryCheckThatDidNotRun(t *testing.T) {
	for name, change := range map[string]func(in *CheckInput){
		"no restart":       func(in *CheckInput) { in.Restart = nil },
		"no snapshot kept": func(in *CheckInput) { in.Restart.Nodes[0].Snapshots = nil },
		"no backup":        func(in *CheckInput) { in.Backups = nil },
		"no scratch":       func(in *CheckInput) { in.Backups[0].Stage, in.Backups[0].Err = BackupScratch, "no free port" },
	} {
		in := cleanInput()
		change(&in)
		if got := kinds(Check(in).Violations); !slices.Equal(got, []string{VCheckIncomplete}) {
			t.Errorf("%s: violations %v, want only %s", name, got, VCheckIncomplete)
		}
	}
}

// A soak whose end failed is still judged on its restart and its backups.
func TestCheckRecoveryAloneAfterAFailedEnd(t *testing.T) {
	in := CheckInput{Restart: &RestartCheck{Skipped: "the end of the soak failed", Nodes: []NodeRestart{
		{Node: "n1", Snapshots: []cluster.SnapshotRestore{{ID: "3-90-1", Index: 90, Err: "record 7: too large"}}},
		{Node: "n2", Err: "did not come back after its last start during the soak", Snapshots: []cluster.SnapshotRestore{{ID: "3-80-1", Index: 80}}},
	}}, Backups: []BackupCheck{{File: "b1", Stage: BackupInspect, Err: "the state inside does not restore"}}}
	res := CheckRecovery(in)
	if got := kinds(res.Violations); !slices.Equal(got, []string{VRestart, VRestart, VBackup}) || res.Checked.Restarted != 0 {
		t.Fatalf("violations %v, checked %+v", got, res.Checked)
	}
}
