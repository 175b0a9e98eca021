package soak

import (
	"fmt"
	"strings"
	"time"
)

// The report's part about the checks after the soak.

func (rep *Report) restartedNodes() int {
	if rep.Restart == nil {
		return 0
	}
	return len(rep.Restart.Nodes)
}

func (rep *Report) afterMarkdown(b *strings.Builder) {
	if rc := rep.Restart; rc != nil {
		b.WriteString("\n### Restart of every node on its data dir\n\n")
		if rc.Skipped != "" {
			fmt.Fprintf(b, "Not restarted: %s.\n\n", cell(rc.Skipped))
		}
		b.WriteString("| node | snapshots kept (newest first) | came back at index | after | result |\n|---|---|---|---|---|\n")
		for _, n := range rc.Nodes {
			var snaps []string
			for _, sn := range n.Snapshots {
				r := "restores"
				if sn.Err != "" {
					r = "**does not restore**"
				}
				snaps = append(snaps, fmt.Sprintf("%d (%d bytes): %s", sn.Index, sn.Size, r))
			}
			result := "ok"
			if n.Err != "" {
				result = "**" + cell(n.Err) + "**"
			}
			if n.NotKept > 0 {
				result += fmt.Sprintf("; **%d snapshots did not read back and were not kept**", n.NotKept)
			}
			fmt.Fprintf(b, "| %s | %s | %d | %s | %s |\n", n.Node, orDash(strings.Join(snaps, "; ")), n.Index, n.Took.Round(100*time.Millisecond), result)
		}
		served := fmt.Sprintf("%d sessions read back as the soak ended them", rc.Sessions)
		if rc.Served != "" {
			served = "**" + cell(rc.Served) + "**"
		}
		fmt.Fprintf(b, "\nServed after the restart: %s.\n", served)
	}
	if len(rep.Backups) > 0 {
		b.WriteString("\n### Backups\n\n| # | taken at | index | state bytes | sessions | result |\n|---|---|---|---|---|---|\n")
		for i, bk := range rep.Backups {
			result := "inspected, restored, served, restarted, served"
			if bk.Err != "" {
				result = fmt.Sprintf("**%s failed: %s**", bk.Stage, cell(bk.Err))
			}
			fmt.Fprintf(b, "| %d | %s | %d | %d | %d | %s |\n", i+1, bk.At.Round(time.Second), bk.Index, bk.Size, bk.Sessions, result)
		}
	}
}

// cell is s on one line of a table: its lines joined, no "|".
func cell(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(strings.TrimSpace(s), "\n", " ⏎ "), "|", "/")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
