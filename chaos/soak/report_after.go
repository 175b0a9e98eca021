package soak

import (
	"fmt"
	"strings"
	"time"

	"github.com/dexhq/dex/cluster"
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
			snaps, index := snapshotsCell(n.Snapshots), fmt.Sprint(n.Index)
			result := "ok"
			if n.Err != "" {
				result = "**" + cell(n.Err) + "**"
			}
			if len(n.Partitions) > 0 { // several partitions: each one's
				var ps, is []string
				for _, p := range n.Partitions {
					ps = append(ps, fmt.Sprintf("p%d: %s", p.Partition, snapshotsCell(p.Snapshots)))
					is = append(is, fmt.Sprintf("p%d %d", p.Partition, p.Index))
					if p.Err != "" {
						result += fmt.Sprintf("; **partition %d: %s**", p.Partition, cell(p.Err))
					}
				}
				snaps, index = strings.Join(ps, "; "), strings.Join(is, ", ")
			}
			if n.NotKept > 0 {
				result += fmt.Sprintf("; **%d snapshots did not read back and were not kept**", n.NotKept)
			}
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s |\n", n.Node, snaps, index, n.Took.Round(100*time.Millisecond), result)
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
			switch {
			case bk.Catalog != "":
				result += fmt.Sprintf("; **its partitions differ: %s**", cell(bk.Catalog))
			case bk.Catalogs > 1:
				result += fmt.Sprintf("; the same catalog and Worker registrations in its %d partitions", bk.Catalogs)
			}
			fmt.Fprintf(b, "| %d | %s | %s | %d | %d | %s |\n", i+1, bk.At.Round(time.Second), bk.indexes(), bk.Size, bk.Sessions, result)
		}
	}
}

// snapshotsCell lists snapshots restored offline, newest first.
func snapshotsCell(snaps []cluster.SnapshotRestore) string {
	var out []string
	for _, sn := range snaps {
		r := "restores"
		if sn.Err != "" {
			r = "**does not restore**"
		}
		out = append(out, fmt.Sprintf("%d (%d bytes): %s", sn.Index, sn.Size, r))
	}
	return orDash(strings.Join(out, "; "))
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
