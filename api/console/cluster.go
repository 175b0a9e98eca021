package console

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

type clusterData struct {
	Status *dexv1.StatusResponse
	// Partitions: each partition's raft group, in a cluster of more than
	// one (nil in a cluster of one, whose figures are the summary line's).
	Partitions []*dexv1.PartitionStatus
	// Workers is the leader's ListWorkers (nil with WorkersError set).
	Workers      *dexv1.ListWorkersResponse
	WorkersError string
	// Tables are the state's tables that hold rows, the largest first.
	Tables []*dexv1.TableSize
	// Providers: each provider with a limit, a hold or a running call.
	Providers []providerView
}

// providerView is a provider with its limits as one text.
type providerView struct {
	*dexv1.ProviderStatus
	Limits string
}

// clusterPage shows the nodes as this node's Status sees them (any node
// answers), and the Workers and queues as the leader knows them.
func (c *Console) clusterPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.apiContext(r)
	defer cancel()
	st, err := c.admin.Status(ctx, &dexv1.StatusRequest{})
	if err != nil {
		c.apiError(w, r, err)
		return
	}
	c.notePartitions(st)
	d := &clusterData{Status: st, Tables: largestTables(st.GetStateSize()), Providers: providerViews(st.GetProviders())}
	if len(st.Partitions) > 1 {
		d.Partitions = st.Partitions
	}
	// Through the leader-following channel: contacts live in its memory.
	wk, err := dexv1.NewAdminServiceClient(c.cfg.Sessions).ListWorkers(ctx, &dexv1.ListWorkersRequest{})
	if err != nil {
		d.WorkersError = c.apiMessage(r, err)
	} else {
		slices.SortFunc(wk.Workers, func(a, b *dexv1.WorkerStatus) int { return strings.Compare(a.Worker.GetId(), b.Worker.GetId()) })
		d.Workers = wk
	}
	p := page{Title: "Cluster", Nav: "cluster", Data: d}
	if nq := client.CheckQuorum(st); nq != nil {
		p.Banner = nq.Error()
	}
	c.render(w, r, http.StatusOK, "cluster", p)
}

// largestTables are the tables of s that hold rows, the most bytes first.
func largestTables(s *dexv1.StateSize) []*dexv1.TableSize {
	var out []*dexv1.TableSize
	for _, t := range s.GetTables() {
		if t.Rows > 0 {
			out = append(out, t)
		}
	}
	slices.SortStableFunc(out, func(a, b *dexv1.TableSize) int { return cmp.Compare(b.Bytes, a.Bytes) })
	return out
}

func providerViews(ps []*dexv1.ProviderStatus) []providerView {
	var out []providerView
	for _, p := range ps {
		out = append(out, providerView{ProviderStatus: p, Limits: limitsText(p)})
	}
	return out
}

// limitsText is a provider's limits, the ones it has only ("none").
func limitsText(p *dexv1.ProviderStatus) string {
	var parts []string
	if p.MaxConcurrent > 0 {
		parts = append(parts, fmt.Sprintf("%d at once", p.MaxConcurrent))
	}
	if p.CallsPerMinute > 0 {
		parts = append(parts, fmt.Sprintf("%d calls/min", p.CallsPerMinute))
	}
	if p.TokensPerMinute > 0 {
		parts = append(parts, fmt.Sprintf("%d tokens/min", p.TokensPerMinute))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " · ")
}
