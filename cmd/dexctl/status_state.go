package main

import (
	"github.com/dustin/go-humanize"

	"fmt"
	"io"
	"slices"
	"strings"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

type stateSizeJSON struct {
	TotalRows         uint64          `json:"total_rows"`
	TotalBytes        uint64          `json:"total_bytes"`
	AppliedIndex      uint64          `json:"applied_index"`
	LastSnapshotBytes uint64          `json:"last_snapshot_bytes"`
	LastSnapshotIndex uint64          `json:"last_snapshot_index"`
	Tables            []tableSizeJSON `json:"tables"`
}

type tableSizeJSON struct {
	Table string `json:"table"`
	Rows  uint64 `json:"rows"`
	Bytes uint64 `json:"bytes"`
}

func stateSizeOf(s *dexv1.StateSize) *stateSizeJSON {
	if s == nil {
		return nil
	}
	out := &stateSizeJSON{
		TotalRows: s.TotalRows, TotalBytes: s.TotalBytes, AppliedIndex: s.AppliedIndex,
		LastSnapshotBytes: s.LastSnapshotBytes, LastSnapshotIndex: s.LastSnapshotIndex,
		Tables: []tableSizeJSON{},
	}
	for _, t := range s.Tables {
		out.Tables = append(out.Tables, tableSizeJSON{Table: t.Table, Rows: t.Rows, Bytes: t.Bytes})
	}
	return out
}

// printStateSize prints the state's size in two lines: the total and the
// snapshot, then the tables that hold rows, the largest first.
func printStateSize(w io.Writer, s *dexv1.StateSize) {
	if s == nil {
		return // a node of an older version
	}
	fmt.Fprintf(w, "\nstate: %s in %s (applied index %d)", humanize.Bytes(s.TotalBytes), plural(s.TotalRows, "row", "rows"), s.AppliedIndex)
	if s.LastSnapshotIndex > 0 {
		fmt.Fprintf(w, "   last snapshot: %s (entry %d)", humanize.Bytes(s.LastSnapshotBytes), s.LastSnapshotIndex)
	}
	fmt.Fprintln(w)
	tables := slices.Clone(s.Tables)
	slices.SortStableFunc(tables, func(a, b *dexv1.TableSize) int {
		switch {
		case a.Bytes > b.Bytes:
			return -1
		case a.Bytes < b.Bytes:
			return 1
		}
		return 0
	})
	var parts []string
	for _, t := range tables {
		if t.Rows > 0 {
			parts = append(parts, fmt.Sprintf("%s %s/%d", t.Table, humanize.Bytes(t.Bytes), t.Rows))
		}
	}
	if len(parts) > 0 {
		fmt.Fprintf(w, "  by table (bytes/rows): %s\n", strings.Join(parts, "  "))
	}
}
