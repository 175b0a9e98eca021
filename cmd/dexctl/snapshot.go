package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

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
			"and verified, then renamed to FILE.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := args[0]
			var saved *backup.Verified
			err := slow().onLeaderOnce(cmd.Context(), func(ctx context.Context, conn *grpc.ClientConn, trailer grpc.CallOption) error {
				stream, err := dexv1.NewAdminServiceClient(conn).SaveSnapshot(ctx, &dexv1.SaveSnapshotRequest{}, trailer)
				if err != nil {
					return err
				}
				var recvErr error
				v, err := backup.WriteFileAtomic(path, func(w io.Writer) error {
					for {
						chunk, err := stream.Recv()
						if errors.Is(err, io.EOF) {
							return nil
						}
						if err != nil {
							recvErr = err // the gRPC status decides whether another node is tried
							return err
						}
						if _, err := w.Write(chunk.Data); err != nil {
							return err
						}
					}
				})
				if recvErr != nil {
					return recvErr
				}
				saved = v
				return err
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "saved %s: index %d, term %d, cluster %s, %s of state, sha256 %s\n",
				path, saved.Index, saved.Term, saved.ClusterID, plural(saved.Size, "byte", "bytes"), saved.Checksum)
			return nil
		},
	}
}

func snapshotInspectCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "inspect FILE",
		Short: "Verify a backup and show what it holds",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := backup.OpenFile(args[0])
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			defer f.Close()
			sum, err := backup.Inspect(f.Verified)
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(sum)
			}
			printSummary(cmd.OutOrStdout(), sum)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func printSummary(w io.Writer, s *backup.Summary) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
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
			"--allow-other-cluster; the cluster keeps its own id.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := backup.OpenFile(args[0])
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			f.Close()
			var resp *dexv1.RestoreSnapshotResponse
			err = slow().onLeaderOnce(cmd.Context(), func(ctx context.Context, conn *grpc.ClientConn, trailer grpc.CallOption) error {
				r, err := sendBackup(ctx, dexv1.NewAdminServiceClient(conn), args[0], &dexv1.RestoreSnapshotRequest{ReplaceSessions: yes, AllowOtherCluster: otherCluster}, trailer)
				resp = r
				return err
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "restored the backup of cluster %s at index %d: %s; the leader runs epoch %d\n",
				resp.BackupClusterId, resp.BackupIndex, plural(resp.Sessions, "session", "sessions"), resp.Epoch)
			return nil
		},
	}
	cmd.Flags().BoolVar(&yes, "yes", false, "replace a state that holds sessions")
	cmd.Flags().BoolVar(&otherCluster, "allow-other-cluster", false, "restore a backup taken on another cluster (this cluster keeps its id)")
	return cmd
}

// sendBackup streams the file at path, first carries the request's flags.
func sendBackup(ctx context.Context, c dexv1.AdminServiceClient, path string, first *dexv1.RestoreSnapshotRequest, trailer grpc.CallOption) (*dexv1.RestoreSnapshotResponse, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	stream, err := c.RestoreSnapshot(ctx, trailer)
	if err != nil {
		return nil, err
	}
	return client.SendBackup(stream, file, first)
}
