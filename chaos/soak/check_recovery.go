package soak

import (
	"fmt"
	"time"
)

// The checker's part about the checks after the soak: the restart of every
// node on its data dir and the backups taken during the run.

// CheckRecovery judges only the restart and the backups: what can still be
// judged of a soak whose end failed.
func CheckRecovery(in CheckInput) CheckResult {
	var res CheckResult
	add := func(kind, session, format string, args ...any) {
		res.Violations = append(res.Violations, Violation{Kind: kind, Session: session, Detail: fmt.Sprintf(format, args...)})
	}
	checkRecovery(in, &res, add)
	return res
}

func checkRecovery(in CheckInput, res *CheckResult, add func(kind, session, format string, args ...any)) {
	checkRestart(in.Restart, res, add)
	checkBackups(in.Backups, res, add)
}

func checkRestart(rc *RestartCheck, res *CheckResult, add func(kind, session, format string, args ...any)) {
	if rc == nil {
		add(VCheckIncomplete, "", "the nodes were not restarted after the soak")
		return
	}
	for _, n := range rc.Nodes {
		if len(n.Snapshots) == 0 && n.Err == "" {
			add(VCheckIncomplete, "", "node %s kept no snapshot: its restart did not start from one", n.Node)
		}
		for _, sn := range n.Snapshots {
			if sn.Err != "" {
				add(VRestart, "", "node %s's snapshot %s (index %d, %d bytes) does not restore: %s", n.Node, sn.ID, sn.Index, sn.Size, sn.Err)
				continue
			}
			res.Checked.Snapshots++
		}
		if n.NotKept > 0 {
			add(VRestart, "", "node %s took %d snapshots that did not read back, so it did not keep them; the first: %s", n.Node, n.NotKept, n.NotKeptLine)
		}
		switch {
		case n.Err != "":
			add(VRestart, "", "node %s %s", n.Node, n.Err)
		case rc.Skipped == "":
			res.Checked.Restarted++
		}
	}
	if rc.Served != "" {
		add(VRestart, "", "after every node restarted on its data dir: %s", rc.Served)
	}
}

func checkBackups(bs []BackupCheck, res *CheckResult, add func(kind, session, format string, args ...any)) {
	if len(bs) == 0 {
		add(VCheckIncomplete, "", "no backup was taken")
	}
	for i, b := range bs {
		switch {
		case b.Err == "":
			res.Checked.Backups++
		case b.Stage == BackupScratch:
			add(VCheckIncomplete, "", "backup %d (index %d) was not restored: its scratch cluster did not start: %s", i+1, b.Index, b.Err)
		default:
			add(VBackup, "", "backup %d (index %d, taken at %s) failed to %s: %s", i+1, b.Index, b.At.Round(time.Second), b.Stage, b.Err)
		}
	}
}
