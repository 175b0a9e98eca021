package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

type statusJSON struct {
	Leader       string           `json:"leader"`
	Term         uint64           `json:"term"`
	CommitIndex  uint64           `json:"commit_index"`
	AppliedIndex uint64           `json:"applied_index"`
	Nodes        []nodeStatusJSON `json:"nodes"`
	// Workers whose tasks expired unclaimed, as the leader counts them.
	Workers []workerHealthJSON `json:"workers"`
	// The replicated state's rows and bytes by table (absent from a node
	// of an older version).
	StateSize *stateSizeJSON `json:"state_size,omitempty"`
	// Each partition's raft group; the fields above are partition 0's.
	Partitions []partitionStatusJSON `json:"partitions"`
	// Each provider with a limit, a hold or a running call, as partition
	// 0's leader counts them.
	Providers []providerStatusJSON `json:"providers"`
}

type nodeStatusJSON struct {
	ID          string `json:"id"`
	RaftAddress string `json:"raft_address"`
	GRPCAddress string `json:"grpc_address"`
	Suffrage    string `json:"suffrage"`
	State       string `json:"state"`
	// The node's own view; absent for an unreachable node (as "-" in the table).
	Term         *uint64 `json:"term,omitempty"`
	CommitIndex  *uint64 `json:"commit_index,omitempty"`
	AppliedIndex *uint64 `json:"applied_index,omitempty"`
}

func newStatusCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the cluster: leader, term, indexes, every node's state and the state's size",
		Long: `Show the cluster: leader, term, indexes and every node's state, as the
first node of --addr that answers sees it, and the size of the replicated
state (its rows and encoded bytes, in total and by table, and the size of the
newest snapshot that node keeps). A cluster of more than one partition also
gets a table of each partition's leader, term, indexes and epoch; the leader,
term and indexes above it are partition 0's. The providers with a limit, a
hold or a running model call follow: their limits, the model Steps running
and throttled, and a hold's end and the Step that set it. With no leader it
still shows the nodes, then says why on stderr and exits 1.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var resp *dexv1.StatusResponse
			err := g.anyNode(cmd.Context(), func(ctx context.Context, c dexv1.AdminServiceClient) error {
				r, err := c.Status(ctx, &dexv1.StatusRequest{})
				resp = r
				return err
			})
			if err != nil {
				return err
			}
			if asJSON {
				err = printStatusJSON(cmd.OutOrStdout(), resp)
			} else {
				printStatus(cmd.OutOrStdout(), resp)
			}
			if err == nil && resp.Leader == "" {
				return noLeader(resp)
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func printStatusJSON(w io.Writer, r *dexv1.StatusResponse) error {
	out := statusJSON{
		Leader:       r.Leader,
		Term:         r.Term,
		CommitIndex:  r.CommitIndex,
		AppliedIndex: r.AppliedIndex,
		Nodes:        []nodeStatusJSON{},
		Workers:      workersJSON(r.Workers),
		StateSize:    stateSizeOf(r.StateSize),
		Partitions:   partitionsJSON(r.Partitions),
		Providers:    providersJSON(r.Providers, time.Now()),
	}
	for _, n := range r.Nodes {
		ns := nodeStatusJSON{
			ID: n.Id, RaftAddress: n.RaftAddress, GRPCAddress: n.GrpcAddress, Suffrage: n.Suffrage, State: n.State,
		}
		if n.State != "unreachable" {
			ns.Term, ns.CommitIndex, ns.AppliedIndex = &n.Term, &n.CommitIndex, &n.AppliedIndex
		}
		out.Nodes = append(out.Nodes, ns)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func printStatus(w io.Writer, r *dexv1.StatusResponse) {
	leader := r.Leader
	if leader == "" {
		leader = "(none)"
	}
	fmt.Fprintf(w, "leader: %s   term: %d   commit index: %d   applied index: %d   epoch: %d   (answered by %s)\n\n",
		leader, r.Term, r.CommitIndex, r.AppliedIndex, r.Epoch, r.AnsweredBy)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tSUFFRAGE\tRAFT ADDRESS\tGRPC ADDRESS\tTERM\tCOMMIT\tAPPLIED")
	for _, n := range r.Nodes {
		grpcAddr := n.GrpcAddress
		if grpcAddr == "" {
			grpcAddr = "-"
		}
		if n.State == "unreachable" {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t-\t-\t-\n", n.Id, n.State, n.Suffrage, n.RaftAddress, grpcAddr)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\n", n.Id, n.State, n.Suffrage, n.RaftAddress, grpcAddr, n.Term, n.CommitIndex, n.AppliedIndex)
	}
	tw.Flush()
	printPartitions(w, r.Partitions)
	printStateSize(w, r.StateSize)
	printWorkerHealth(w, r.Workers)
	printProviders(w, r.Providers, time.Now())
}

// noLeader is status's failure when the cluster has no leader: too few
// voters answer, or an election is under way.
func noLeader(r *dexv1.StatusResponse) error {
	if nq := client.CheckQuorum(r); nq != nil {
		return fmt.Errorf("no leader: %v", nq)
	}
	return fmt.Errorf("no leader yet (node %s knows none); an election is under way", r.AnsweredBy)
}
