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

// parts are the node's partitions restarted: with one, the node's.
func (n NodeRestart) parts() []PartitionRestart {
	if len(n.Partitions) == 0 {
		return []PartitionRestart{{Snapshots: n.Snapshots}}
	}
	return n.Partitions
}

// caughtUp: with several partitions, the node caught up in every one
// (with one, Err says it did not).
func (n NodeRestart) caughtUp() bool {
	for _, p := range n.Partitions {
		if p.Err != "" {
			return false
		}
	}
	return true
}

// adderIn is an add of violations in partition k: each names it.
func (res *CheckResult) adderIn(k int) func(kind, session, format string, args ...any) {
	return func(kind, session, format string, args ...any) {
		res.Violations = append(res.Violations, Violation{Kind: kind, Session: session, Partition: &k,
			Detail: fmt.Sprintf("partition %d: ", k) + fmt.Sprintf(format, args...)})
	}
}

func checkRestart(rc *RestartCheck, res *CheckResult, add func(kind, session, format string, args ...any)) {
	if rc == nil {
		add(VCheckIncomplete, "", "the nodes were not restarted after the soak")
		return
	}
	for _, n := range rc.Nodes {
		for _, p := range n.parts() {
			add := add
			if len(n.Partitions) > 0 {
				add = res.adderIn(p.Partition)
			}
			if len(p.Snapshots) == 0 && n.Err == "" {
				add(VCheckIncomplete, "", "node %s kept no snapshot: its restart did not start from one", n.Node)
			}
			for _, sn := range p.Snapshots {
				if sn.Err != "" {
					add(VRestart, "", "node %s's snapshot %s (index %d, %d bytes) does not restore: %s", n.Node, sn.ID, sn.Index, sn.Size, sn.Err)
					continue
				}
				res.Checked.Snapshots++
			}
			if p.Err != "" {
				add(VRestart, "", "node %s %s", n.Node, p.Err)
			}
		}
		if n.NotKept > 0 {
			add(VRestart, "", "node %s took %d snapshots that did not read back, so it did not keep them; the first: %s", n.Node, n.NotKept, n.NotKeptLine)
		}
		switch {
		case n.Err != "":
			add(VRestart, "", "node %s %s", n.Node, n.Err)
		case rc.Skipped == "" && n.caughtUp():
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
		if b.Catalog != "" {
			add(VCatalog, "", "backup %d (taken at %s): its partitions differ: %s", i+1, b.At.Round(time.Second), b.Catalog)
		} else if b.Catalogs > 1 {
			res.Checked.Catalogs++
		}
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
