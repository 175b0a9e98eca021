package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/cluster/backup"
)

func newSnapshotCmd(g *globals) *cobra.Command {
	// A snapshot of a large state takes a while: give each node more time.
	slow := func() *globals {
		s := *g
		s.timeout = max(s.timeout, 10*time.Minute)
		return &s
	}
	cmd := &cobra.Command{
		Use:   "snapshot",
		Short: "Back up the whole state of the cluster to a file, inspect a backup, restore one",
	}
	cmd.AddCommand(snapshotSaveCmd(slow), snapshotInspectCmd(), snapshotRestoreCmd(slow))
	return cmd
}

func snapshotSaveCmd(slow func() *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "save FILE",
		Short: "Save a consistent snapshot of the whole state, taken on the leader, to FILE",
		Long: "Save a consistent snapshot of the whole state, taken on the leader, to FILE. The file\n" +
			"records the raft index and term it was taken at, the cluster id its state records and a\n" +
			"SHA-256 checksum of the header and the state; it is written to a temporary file, synced\n" +
			"and verified, then renamed to FILE. In a cluster of several partitions FILE holds a\n" +
			"snapshot of each partition, each taken on its leader and consistent on its own.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := args[0]
			g := slow()
			n := max(g.partitionCount(cmd.Context()), 1)
			var saved *backup.Set
			err := g.onPartitionLeaders(n)(cmd.Context(), func(ctx context.Context, conn *grpc.ClientConn, trailer grpc.CallOption) error {
				admin := dexv1.NewAdminServiceClient(conn)
				receive := func(k int, w io.Writer) error {
					stream, err := admin.SaveSnapshot(client.ToPartition(ctx, k), &dexv1.SaveSnapshotRequest{}, trailer)
					if err == nil {
						err = client.ReceiveBackup(stream, w)
					}
					return ofPartition(n, k, err)
				}
				set, err := backup.WriteSetFileAtomic(path, func(w io.Writer) error {
					if n == 1 {
						return receive(0, w)
					}
					_, err := backup.WriteSet(w, n, receive)
					return err
				})
				saved = set
				return err
			})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if n == 1 {
				s := saved.Sections[0]
				fmt.Fprintf(out, "saved %s: index %d, term %d, cluster %s, %s of state, sha256 %s\n",
					path, s.Index, s.Term, s.ClusterID, plural(s.Size, "byte", "bytes"), s.Checksum)
				return nil
			}
			fmt.Fprintf(out, "saved %s: %d partitions of cluster %s, sha256 %s\n", path, n, saved.ClusterID(), saved.Checksum)
			for k, s := range saved.Sections {
				fmt.Fprintf(out, "  partition %d: index %d, term %d, %s of state\n", k, s.Index, s.Term, plural(s.Size, "byte", "bytes"))
			}
			return nil
		},
	}
}

// onPartitionLeaders is how a backup or a restore of a cluster of n
// partitions reaches each partition's leader: with one partition, as it
// always did (each node tried once); with several, through any node,
// waiting up to --wait while a partition's leadership moves (the balancer
// moves leaderships at any time), as session commands do.
func (g *globals) onPartitionLeaders(n int) func(context.Context, func(context.Context, *grpc.ClientConn, grpc.CallOption) error) error {
	if n == 1 {
		return g.onLeaderOnce
	}
	return g.onLeader
}

// ofPartition names partition k, of a cluster of n, in a call's error,
// which keeps its gRPC code.
func ofPartition(n, k int, err error) error {
	if err == nil || n == 1 {
		return err
	}
	if st, ok := status.FromError(err); ok {
		return status.Errorf(st.Code(), "partition %d: %s", k, st.Message())
	}
	return fmt.Errorf("partition %d: %w", k, err)
}

func snapshotInspectCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "inspect FILE",
		Short: "Verify a backup and show what it holds",
		Long: "Verify a backup and show what it holds. The backup of a cluster of several partitions\n" +
			"shows each partition's.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := backup.OpenSetFile(args[0])
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			defer f.Close()
			var sum any
			if f.Partitions() == 1 {
				sum, err = backup.Inspect(f.Sections[0])
			} else {
				sum, err = backup.InspectSet(f.Set)
			}
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(sum)
			}
			switch s := sum.(type) {
			case *backup.Summary:
				printSummary(cmd.OutOrStdout(), s, "")
			case *backup.SetSummary:
				printSetSummary(cmd.OutOrStdout(), s)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// printSetSummary shows the backup of a cluster of several partitions:
// the file, then each partition's backup.
func printSetSummary(w io.Writer, s *backup.SetSummary) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "cluster\t%s\n", s.ClusterID)
	fmt.Fprintf(tw, "partitions\t%d\n", s.Partitions)
	fmt.Fprintf(tw, "sha256\t%s (verified)\n", s.Checksum)
	fmt.Fprintf(tw, "format\tbackup %d (its checksum covers %s)\n", s.FormatVersion, backup.ChecksumCovers(s.FormatVersion))
	tw.Flush()
	for _, sec := range s.Sections {
		fmt.Fprintf(w, "\npartition %d\n", sec.Partition)
		printSummary(w, sec.Summary, "  ")
	}
}

// printSummary shows one backup, each line after indent.
func printSummary(w io.Writer, s *backup.Summary, indent string) {
	var table bytes.Buffer
	tw := tabwriter.NewWriter(&table, 0, 4, 2, ' ', 0)
	taken := "-"
	if s.TakenAtMs > 0 {
		taken = time.UnixMilli(s.TakenAtMs).UTC().Format(time.RFC3339)
	}
	fmt.Fprintf(tw, "cluster\t%s\n", s.ClusterID)
	fmt.Fprintf(tw, "index\t%d\n", s.Index)
	fmt.Fprintf(tw, "term\t%d\n", s.Term)
	fmt.Fprintf(tw, "taken at\t%s\n", taken)
	fmt.Fprintf(tw, "size\t%s\n", plural(s.Size, "byte", "bytes"))
	fmt.Fprintf(tw, "sha256\t%s (verified)\n", s.Checksum)
	fmt.Fprintf(tw, "format\tbackup %d (its checksum covers %s), state %d\n", s.FormatVersion, backup.ChecksumCovers(s.FormatVersion), s.StateVersion)
	fmt.Fprintf(tw, "epoch\t%d\n", s.Epoch)
	c := s.Counts
	fmt.Fprintf(tw, "sessions\t%s\n", byStatus(c.Sessions))
	fmt.Fprintf(tw, "steps\t%s\n", byStatus(c.Steps))
	fmt.Fprintf(tw, "timers pending\t%d\n", c.TimersPending)
	fmt.Fprintf(tw, "history entries\t%d\n", c.History)
	fmt.Fprintf(tw, "inbox messages\t%d\n", c.Inbox)
	fmt.Fprintf(tw, "accepted message ids\t%d\n", c.AcceptedIDs)
	fmt.Fprintf(tw, "events\t%d\n", c.Events)
	fmt.Fprintf(tw, "workers\t%d\n", c.Workers)
	fmt.Fprintf(tw, "tools\t%d\n", c.Tools)
	fmt.Fprintf(tw, "nodes\t%d\n", c.Nodes)
	tw.Flush()
	for _, line := range strings.SplitAfter(table.String(), "\n") {
		if line != "" {
			io.WriteString(w, indent+line)
		}
	}
}

// byStatus prints "5 (idle 3, waiting 2)".
func byStatus(m map[string]int) string {
	total := 0
	keys := make([]string, 0, len(m))
	for k, n := range m {
		total += n
		keys = append(keys, k)
	}
	if total == 0 {
		return "0"
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return fmt.Sprintf("%d (%s)", total, strings.Join(parts, ", "))
}

func snapshotRestoreCmd(slow func() *globals) *cobra.Command {
	var yes, otherCluster bool
	cmd := &cobra.Command{
		Use:   "restore FILE",
		Short: "Replace the whole state of the cluster with a backup's",
		Long: "Replace the whole state of the cluster with a backup's, through raft on the leader; every\n" +
			"node takes it. The file is verified first, and its header must name the cluster its\n" +
			"state records. A cluster that holds sessions is replaced only with --yes. A backup of\n" +
			"another cluster (disaster recovery into a new cluster) is restored only with\n" +
			"--allow-other-cluster; the cluster keeps its own id.\n\n" +
			"A cluster of several partitions is restored from a backup of as many partitions, each\n" +
			"partition from its own, partition 0 first, each waiting up to --wait for its partition's\n" +
			"leader. Should one fail, the error names the partitions that were restored and those\n" +
			"that were not: run the restore again, which restores every partition again.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := args[0]
			f, err := backup.OpenSetFile(path)
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			defer f.Close()
			g, ctx := slow(), cmd.Context()
			n, got := g.partitionCount(ctx), f.Partitions()
			switch {
			case n == 0 && got > 1:
				return fmt.Errorf("%s is the backup of a cluster of %d partitions and no node says how many this cluster has (its Status): nothing was restored", path, got)
			case n == 0:
				n = 1 // the cluster checks it too
			}
			if got != n {
				return fmt.Errorf("%s is the backup of a cluster of %s and this cluster has %s: a restore needs the same number of partitions; nothing was restored",
					path, plural(got, "partition", "partitions"), plural(n, "partition", "partitions"))
			}
			if n > 1 && !yes {
				// Each partition checks its own sessions: ask first, so
				// that no partition is replaced before another refuses.
				if err := g.refuseSessions(ctx); err != nil {
					return err
				}
			}
			var resps []*dexv1.RestoreSnapshotResponse
			for k, sec := range f.Sections {
				var resp *dexv1.RestoreSnapshotResponse
				err := g.onPartitionLeaders(n)(ctx, func(ctx context.Context, conn *grpc.ClientConn, trailer grpc.CallOption) error {
					stream, err := dexv1.NewAdminServiceClient(conn).RestoreSnapshot(client.ToPartition(ctx, k), trailer)
					if err != nil {
						return ofPartition(n, k, err)
					}
					resp, err = client.SendBackup(stream, io.NewSectionReader(sec.Raw, 0, sec.Raw.Size()), &dexv1.RestoreSnapshotRequest{ReplaceSessions: yes, AllowOtherCluster: otherCluster})
					return ofPartition(n, k, err)
				})
				if err != nil {
					return restoredUpTo(k, n, err)
				}
				resps = append(resps, resp)
			}
			out := cmd.OutOrStdout()
			if n == 1 {
				r := resps[0]
				fmt.Fprintf(out, "restored the backup of cluster %s at index %d: %s; the leader runs epoch %d\n",
					r.BackupClusterId, r.BackupIndex, plural(r.Sessions, "session", "sessions"), r.Epoch)
				return nil
			}
			var total uint64
			for _, r := range resps {
				total += r.Sessions
			}
			fmt.Fprintf(out, "restored the backup of cluster %s, every one of its %d partitions: %s\n", resps[0].BackupClusterId, n, plural(total, "session", "sessions"))
			for k, r := range resps {
				fmt.Fprintf(out, "  partition %d: index %d, %s; its leader runs epoch %d\n", k, r.BackupIndex, plural(r.Sessions, "session", "sessions"), r.Epoch)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&yes, "yes", false, "replace a state that holds sessions")
	cmd.Flags().BoolVar(&otherCluster, "allow-other-cluster", false, "restore a backup taken on another cluster (this cluster keeps its id)")
	return cmd
}

// refuseSessions refuses, before any partition is restored, to replace a
// cluster that holds sessions.
func (g *globals) refuseSessions(ctx context.Context) error {
	var held bool
	err := g.onLeader(ctx, func(ctx context.Context, conn *grpc.ClientConn, trailer grpc.CallOption) error {
		r, err := sessions(conn).ListSessions(ctx, &dexv1.ListSessionsRequest{PageSize: 1}, trailer)
		held = err == nil && len(r.Sessions) > 0
		return err
	})
	switch {
	case err != nil:
		return fmt.Errorf("ask whether the cluster holds sessions: %w; nothing was restored", err)
	case held:
		return errors.New("this cluster holds sessions and a restore replaces the whole state: confirm to replace them (--yes); nothing was restored")
	}
	return nil
}

// restoredUpTo is the error of a restore that failed at partition k of n:
// the partitions before k hold the backup's state, the others their own.
func restoredUpTo(k, n int, err error) error {
	if k == 0 {
		if n == 1 {
			return err
		}
		return fmt.Errorf("%w; nothing was restored", err)
	}
	return fmt.Errorf("%w; %s restored from the backup, %s not: run the restore again (with --yes), which restores every partition again",
		err, partitionRange(0, k-1), partitionRange(k, n-1))
}

// partitionRange names partitions lo to hi: "partition 0 was", "partitions
// 1 and 2 were", "partitions 0 to 3 were".
func partitionRange(lo, hi int) string {
	switch {
	case lo == hi:
		return fmt.Sprintf("partition %d was", lo)
	case hi == lo+1:
		return fmt.Sprintf("partitions %d and %d were", lo, hi)
	}
	return fmt.Sprintf("partitions %d to %d were", lo, hi)
}
