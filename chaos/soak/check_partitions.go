package soak

import (
	"fmt"
	"slices"
	"strings"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/wirerules"
)

// The checker on a cluster of several partitions. A session lives in one
// partition (wirerules.PartitionOf: the soak makes no child sessions) and
// every check of a session stays inside it, so the verdicts are those of
// one partition; what changes is that the node states are compared, and
// the snapshots restored, partition by partition, and that the report
// gives each partition's figures: the session checks run again on each
// partition's part of the run for its counts, and each violation counts
// in the partition of its session, or in the one it names.

// PartitionCheck is what the checker looked at in one partition and the
// violations it found there.
type PartitionCheck struct {
	Partition   int `json:"partition"`
	Sessions    int `json:"sessions"`
	Turns       int `json:"turns"` // turns completed in its sessions' final state
	AckedWrites int `json:"acked_writes"`
	Calls       int `json:"calls"`
	LedgerLines int `json:"ledger_lines"`
	HistoryOps  int `json:"history_ops"`
	// DigestIndex: the index its nodes' states were compared at;
	// Snapshots: its snapshots restored offline after the soak.
	DigestIndex uint64 `json:"digest_index,omitempty"`
	Snapshots   int    `json:"snapshots_restored"`
	Violations  int    `json:"violations"`
}

// checkPartitions counts what was checked in each partition and names
// each violation's partition.
func checkPartitions(in CheckInput, res *CheckResult) []PartitionCheck {
	out := make([]PartitionCheck, in.Partitions)
	discard := func(kind, session, format string, args ...any) {}
	for k := range out {
		sub := in.only(k)
		var r CheckResult
		checkAcked(sub, &r, discard)
		checkLedger(sub, &r, discard)
		p := PartitionCheck{Partition: k, Sessions: len(sub.Final), AckedWrites: r.Checked.AckedWrites, Calls: r.Checked.Calls,
			LedgerLines: len(sub.Ledger), HistoryOps: len(sub.Ops)}
		for _, f := range sub.Final {
			p.Turns += int(f.GetSession().GetTurnsCompleted())
		}
		if k < len(in.PartitionDigests) {
			p.DigestIndex = in.PartitionDigests[k].Index
		}
		p.Snapshots = restoredSnapshots(in.Restart, k)
		out[k] = p
	}
	for i := range res.Violations {
		v := &res.Violations[i]
		if v.Partition == nil && v.Session != "" {
			k := wirerules.PartitionOf(v.Session, in.Partitions)
			v.Partition = &k
		}
		if v.Partition != nil && *v.Partition < len(out) {
			out[*v.Partition].Violations++
		}
	}
	return out
}

// only is the part of in that partition k holds: its sessions'
// operations, executions, final state and closes.
func (in CheckInput) only(k int) CheckInput {
	of := func(session string) bool { return wirerules.PartitionOf(session, in.Partitions) == k }
	sub := CheckInput{Partitions: in.Partitions, Final: map[string]*dexv1.GetSessionResponse{}}
	for _, op := range in.Ops {
		if of(op.Session) {
			sub.Ops = append(sub.Ops, op)
		}
	}
	for _, e := range in.Ledger {
		if of(e.Session) {
			sub.Ledger = append(sub.Ledger, e)
		}
	}
	for id, r := range in.Final {
		if of(id) {
			sub.Final[id] = r
		}
	}
	if in.Life != nil {
		life := *in.Life
		life.Closed = map[string]*ClosedSession{}
		for id, c := range in.Life.Closed {
			if of(id) {
				life.Closed[id] = c
			}
		}
		sub.Life = &life
	}
	return sub
}

// restoredSnapshots counts partition k's snapshots that restored offline
// on every node after the soak.
func restoredSnapshots(rc *RestartCheck, k int) int {
	n := 0
	if rc == nil {
		return 0
	}
	for _, node := range rc.Nodes {
		for _, p := range node.Partitions {
			if p.Partition != k {
				continue
			}
			for _, sn := range p.Snapshots {
				if sn.Err == "" {
					n++
				}
			}
		}
	}
	return n
}

// leaderFaultsBy counts the leader faults that struck each of n
// partitions' leader.
func (rep *Report) leaderFaultsBy(n int) []int {
	out := make([]int, n)
	for _, f := range rep.FaultLog {
		if f.Partition < n && slices.Contains(leaderFaults, f.Kind) {
			out[f.Partition]++
		}
	}
	return out
}

// acrossPartitions counts the violations that are in no one partition:
// of the whole history, the backups, the catalog.
func (rep *Report) acrossPartitions() int {
	n := 0
	for _, v := range rep.Check.Violations {
		if v.Partition == nil {
			n++
		}
	}
	return n
}

// partitionsSummary is the summary's lines of a cluster of several
// partitions: each partition's figures, then the catalog's.
func (rep *Report) partitionsSummary(b *strings.Builder) {
	if rep.Partitions < 2 {
		return
	}
	faults := rep.leaderFaultsBy(rep.Partitions)
	for _, p := range rep.Check.Partitions {
		fmt.Fprintf(b, "partition %d: %d sessions, %d turns, %d acknowledged writes, %d calls, %d ledger lines, %d leader faults, %d violations\n",
			p.Partition, p.Sessions, p.Turns, p.AckedWrites, p.Calls, p.LedgerLines, faults[p.Partition], p.Violations)
	}
	fmt.Fprintf(b, "across partitions: the same tool catalog and Worker registrations in every partition of %d of %d backups; %d violations in no one partition\n",
		rep.Check.Checked.Catalogs, len(rep.Backups), rep.acrossPartitions())
}

// partitionsMarkdown is the report's section on the partitions.
func (rep *Report) partitionsMarkdown(b *strings.Builder) {
	if rep.Partitions < 2 {
		return
	}
	faults := rep.leaderFaultsBy(rep.Partitions)
	fmt.Fprintf(b, "\n### Partitions\n\nThe cluster ran %d partitions. Each leader fault struck the leader of one, drawn from the seed; each session's checks ran in its partition.\n\n", rep.Partitions)
	b.WriteString("| partition | leader faults | sessions | turns | acknowledged writes | calls | ledger lines | states compared at index | snapshots restored | violations |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, p := range rep.Check.Partitions {
		fmt.Fprintf(b, "| %d | %d | %d | %d | %d | %d | %d | %d | %d | %d |\n",
			p.Partition, faults[p.Partition], p.Sessions, p.Turns, p.AckedWrites, p.Calls, p.LedgerLines, p.DigestIndex, p.Snapshots, p.Violations)
	}
	fmt.Fprintf(b, "\nAcross partitions: every partition held the same tool catalog and Worker registrations in %d of %d backups; %d violations are in no one partition (the whole history, the backups, the catalog).\n",
		rep.Check.Checked.Catalogs, len(rep.Backups), rep.acrossPartitions())
}
