package soak

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// WriteReport writes out/soak.md and out/soak.json.
func WriteReport(out string, rep *Report) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "soak.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, "soak.md"), []byte(rep.Markdown()), 0o644)
}

func sortedCounts(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Summary is the soak's verdict in a few lines.
func (rep *Report) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "soak: seed %d, %s (wall %s): %d client operations, %d faults of %d kinds, %d sessions, %d executions\n",
		rep.Seed, rep.Duration, rep.Wall.Round(time.Second), rep.OpsTotal, len(rep.FaultLog), len(rep.Faults), rep.Sessions, rep.Executions)
	var ops, faults []string
	for _, k := range sortedCounts(rep.Ops) {
		ops = append(ops, fmt.Sprintf("%s %d", k, rep.Ops[k]))
	}
	for _, k := range sortedCounts(rep.Faults) {
		faults = append(faults, fmt.Sprintf("%s %d", k, rep.Faults[k]))
	}
	fmt.Fprintf(&b, "operations: %s\n", strings.Join(ops, ", "))
	fmt.Fprintf(&b, "faults: %s\n", strings.Join(faults, ", "))
	c := rep.Check.Checked
	fmt.Fprintf(&b, "checked: %d acknowledged writes, %d calls, %d ledger lines, %d nodes' states, linearizable: %s\n",
		c.AckedWrites, c.Calls, c.LedgerLines, c.Nodes, rep.Check.Linearizable)
	fmt.Fprintf(&b, "after: %d of %d nodes restarted on their data dirs and caught up (%d snapshots restored offline), %d of %d backups inspected, restored and served\n",
		c.Restarted, rep.restartedNodes(), c.Snapshots, c.Backups, len(rep.Backups))
	rep.lifecycleSummary(&b)
	rep.partitionsSummary(&b)
	fmt.Fprintf(&b, "violations: %d\n", len(rep.Check.Violations))
	return b.String()
}

// Markdown is the report.
func (rep *Report) Markdown() string {
	var b strings.Builder
	b.WriteString("# Soak\n\n")
	big := ""
	if rep.Big {
		big = " --big"
	}
	if l := rep.Lifecycle; l != nil {
		big += " --retention " + l.Retention.String()
		if l.Archive {
			big += " --archive"
		}
	}
	if rep.Partitions > 1 {
		big += fmt.Sprintf(" --partitions %d", rep.Partitions)
	}
	fmt.Fprintf(&b, "`dexchaos soak --duration %s --seed %d%s`: wall time %s, %d client operations, %d faults, %d sessions, %d executions in the Workers' ledger.\n\n",
		rep.Duration, rep.Seed, big, rep.Wall.Round(time.Second), rep.OpsTotal, len(rep.FaultLog), rep.Sessions, rep.Executions)
	if rep.Err != "" {
		fmt.Fprintf(&b, "**The soak itself failed:** %s\n\n", rep.Err)
	}
	fmt.Fprintf(&b, "Fault kinds drawn: %s.\n\n", strings.Join(rep.Kinds, ", "))
	b.WriteString("## Operations\n\n| kind | total | ok | no answer | refused |\n|---|---|---|---|---|\n")
	for _, k := range sortedCounts(rep.Ops) {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d |\n", k, rep.Ops[k], rep.Answers[k+" "+AnsOK], rep.Answers[k+" "+AnsUnknown], rep.Answers[k+" "+AnsRefused])
	}
	b.WriteString("\n## Faults\n\n| kind | injected |\n|---|---|\n")
	for _, k := range sortedCounts(rep.Faults) {
		fmt.Fprintf(&b, "| %s | %d |\n", k, rep.Faults[k])
	}
	c := rep.Check.Checked
	b.WriteString("\n## Check\n\n")
	fmt.Fprintf(&b, "- acknowledged writes present: %d checked\n- executions against policy and attempts: %d calls, %d ledger lines\n- node states compared: %d\n- linearizability (porcupine, %d operations): %s\n",
		c.AckedWrites, c.Calls, c.LedgerLines, c.Nodes, c.HistoryOps, rep.Check.Linearizable)
	if rep.Check.Visualization != "" {
		fmt.Fprintf(&b, "- visualisation of the failing history: %s\n", rep.Check.Visualization)
	}
	fmt.Fprintf(&b, "- nodes restarted on their data dirs, caught up and serving: %d of %d; their snapshots restored offline: %d\n- backups inspected, restored into a scratch cluster and served: %d of %d\n",
		c.Restarted, rep.restartedNodes(), c.Snapshots, c.Backups, len(rep.Backups))
	rep.afterMarkdown(&b)
	rep.partitionsMarkdown(&b)
	rep.lifecycleMarkdown(&b)
	fmt.Fprintf(&b, "\n## Violations: %d\n\n", len(rep.Check.Violations))
	for _, v := range rep.Check.Violations {
		s := ""
		if v.Session != "" {
			s = " (" + v.Session + ")"
		}
		fmt.Fprintf(&b, "- **%s**%s: %s\n", v.Kind, s, v.Detail)
	}
	if rep.Logs != "" {
		fmt.Fprintf(&b, "\nLogs kept in %s.\n", rep.Logs)
	}
	b.WriteString("\n## Fault log\n\n| # | at | kind | what |\n|---|---|---|---|\n")
	for _, f := range rep.FaultLog {
		what := f.What
		if f.Err != "" {
			what += " (error: " + f.Err + ")"
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s |\n", f.N, f.At.Round(time.Second), f.Kind, strings.ReplaceAll(what, "|", "/"))
	}
	return b.String()
}
