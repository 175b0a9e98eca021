package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// importChunk is the size of the chunks the import sends (the cluster
// takes up to 1 MiB each).
const importChunk = 256 << 10

func newSessionImportCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "import FILE",
		Short: "Bring an archived session back into the cluster (FILE: an export or the archive's object, - for standard input)",
		Long: `Bring an archived session back (docs/archive.md): FILE holds the archive
object that dexctl session export prints or the archive keeps, - reads it
from standard input. The session comes back with its id, history, Steps
with their attempts, events and status; a closed session's retention
counts from the import. Only a session at rest (idle, paused, errored or
closed) is imported, under an id the cluster does not hold.

An import cut by a change of leader is discarded by the new leader: run it
again (it answers "still being removed" until the discarded rows are gone).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			obj, err := readArchiveFile(cmd, args[0])
			if err != nil {
				return err
			}
			var resp *dexv1.ImportSessionResponse
			err = g.onLeader(cmd.Context(), func(ctx context.Context, conn *grpc.ClientConn, tr grpc.CallOption) error {
				resp, err = sendImport(ctx, sessions(conn), obj, tr)
				return err
			})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), map[string]any{
					"id": resp.SessionId, "history": resp.History, "steps": resp.Steps, "events": resp.Events, "folded_turns": resp.FoldedTurns,
				})
			}
			folded := ""
			if resp.FoldedTurns > 0 {
				folded = ", " + plural(resp.FoldedTurns, "folded turn", "folded turns")
			}
			fmt.Fprintf(cmd.OutOrStdout(), "imported %s: %s, %s%s, %s\n", safe(resp.SessionId),
				plural(resp.History, "history entry", "history entries"), plural(resp.Steps, "Step", "Steps"), folded, plural(resp.Events, "event", "events"))
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// readArchiveFile reads FILE ("-": standard input), refusing one larger
// than a cluster imports before anything is sent.
func readArchiveFile(cmd *cobra.Command, name string) ([]byte, error) {
	var r io.Reader
	if name == "-" {
		r = cmd.InOrStdin()
	} else {
		f, err := os.Open(name)
		if err != nil {
			return nil, fmt.Errorf("read the archived session: %v", err)
		}
		defer f.Close()
		r = f
	}
	obj, err := io.ReadAll(io.LimitReader(r, client.MaxImport+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("read the archived session: %v", err)
	case len(obj) > client.MaxImport:
		return nil, fmt.Errorf("%s is over %d bytes (256 MiB), more than a cluster imports", name, client.MaxImport)
	case len(obj) == 0:
		return nil, fmt.Errorf("%s is empty: give an archived session (dexctl session export ID --out FILE)", name)
	}
	return obj, nil
}

// sendImport streams obj to ImportSession.
func sendImport(ctx context.Context, c dexv1.SessionServiceClient, obj []byte, opts ...grpc.CallOption) (*dexv1.ImportSessionResponse, error) {
	stream, err := c.ImportSession(ctx, opts...)
	if err != nil {
		return nil, err
	}
	for len(obj) > 0 {
		n := min(len(obj), importChunk)
		if err := stream.Send(&dexv1.ImportSessionRequest{Chunk: obj[:n]}); err != nil {
			break // the server ended the stream: CloseAndRecv says why
		}
		obj = obj[n:]
	}
	return stream.CloseAndRecv()
}
