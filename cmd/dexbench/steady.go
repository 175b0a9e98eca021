package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// steadyLoad is the --steady run: rounds of --sessions sessions one after
// another for a while, and how often the cluster changed leader meanwhile.
type steadyLoad struct {
	Seconds  float64 `json:"seconds"`
	Rounds   int     `json:"rounds"`
	Sessions int     `json:"sessions"`
	// Elections: how far the highest raft term moved during the run; every
	// election, won or not, moves it by one.
	Elections int `json:"elections"`
	// EpochChanges: new dispatch epochs, one per established leadership.
	EpochChanges int    `json:"epoch_changes"`
	LeaderAtEnd  string `json:"leader_at_end"`
	Error        string `json:"error,omitempty"`
}

// runSteady drives rounds, their sessions shaped by shape, until d has
// passed and counts the elections from the nodes' metrics before and after.
func runSteady(ctx context.Context, cl *client.Client, svc dexv1.SessionServiceClient, fin *finishes, sessions int, d time.Duration, httpAddrs map[string]string, shape sessionShape) *steadyLoad {
	top := func(m metrics, name string) float64 {
		v := 0.0
		for _, node := range m {
			v = max(v, node[name])
		}
		return v
	}
	before := scrape(httpAddrs)
	out := &steadyLoad{}
	start := time.Now()
	for time.Since(start) < d && ctx.Err() == nil {
		out.Rounds++
		rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		_, _, _, err := drive(rctx, cl, svc, fin, idRange{prefix: fmt.Sprintf("steady%d", out.Rounds), n: sessions}, shape)
		cancel()
		if err != nil {
			out.Error = fmt.Sprintf("round %d: %v", out.Rounds, err)
			break
		}
		out.Sessions += sessions
	}
	out.Seconds = time.Since(start).Seconds()
	after := scrape(httpAddrs)
	out.Elections = int(top(after, "dex_raft_term") - top(before, "dex_raft_term"))
	out.EpochChanges = int(top(after, "dex_epoch") - top(before, "dex_epoch"))
	for id, node := range after {
		if node["dex_ready"] == 1 {
			out.LeaderAtEnd = id
		}
	}
	return out
}

func (s *steadyLoad) write(w io.Writer) {
	fmt.Fprintf(w, "steady load: %d rounds, %d sessions in %.0f s; elections %d, new leaderships %d; leader at the end %s\n",
		s.Rounds, s.Sessions, s.Seconds, s.Elections, s.EpochChanges, s.LeaderAtEnd)
	if s.Error != "" {
		fmt.Fprintf(w, "steady load stopped: %s\n", s.Error)
	}
}
