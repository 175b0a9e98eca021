package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

type workerHealthJSON struct {
	ID                string `json:"id"`
	Healthy           bool   `json:"healthy"`
	UnclaimedInARow   uint32 `json:"unclaimed_in_a_row"`
	UnclaimedExpiries uint64 `json:"unclaimed_expiries"`
}

func workersJSON(ws []*dexv1.WorkerHealth) []workerHealthJSON {
	out := []workerHealthJSON{}
	for _, w := range ws {
		out = append(out, workerHealthJSON{ID: w.WorkerId, Healthy: !w.Unhealthy, UnclaimedInARow: w.UnclaimedInARow, UnclaimedExpiries: w.UnclaimedExpiries})
	}
	return out
}

// printWorkerHealth lists the Workers whose tasks expired unclaimed (the
// leader's count); nothing when there are none.
func printWorkerHealth(w io.Writer, ws []*dexv1.WorkerHealth) {
	if len(ws) == 0 {
		return
	}
	fmt.Fprintln(w, "\nWorkers whose tasks expired unclaimed (an unhealthy one gets Steps only when no healthy Worker polls for them):")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKER\tHEALTH\tUNCLAIMED IN A ROW\tUNCLAIMED EXPIRIES")
	for _, h := range ws {
		state := "healthy"
		if h.Unhealthy {
			state = "unhealthy"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\n", h.WorkerId, state, h.UnclaimedInARow, h.UnclaimedExpiries)
	}
	tw.Flush()
}
