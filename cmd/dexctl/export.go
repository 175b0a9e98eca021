package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/dexhq/dex/api/archive"
	"github.com/dexhq/dex/api/archive/format"
	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// exportTimeout bounds an export from the cluster: it follows the leader
// across a takeover, but does not wait for one forever.
const exportTimeout = 10 * time.Minute

func newSessionExportCmd(g *globals) *cobra.Command {
	var archiveURL, out string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "export ID",
		Short: "Print a session in the archive format, from the cluster or, once archived, from the archive",
		Long: `Print a session in the archive format (docs/archive.md): its header,
history, Steps with their attempts and kept events, as one checksummed,
compressed object. The session is read from the cluster; when the cluster
does not hold it and --archive-url is given, from the archive. The same
session gives the same bytes from both.

--json prints the session as readable JSON instead.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			id := args[0]
			obj, err := g.exportFromCluster(ctx, id)
			if errors.Is(err, archive.ErrNotFound) && archiveURL != "" {
				obj, err = exportFromArchive(ctx, archiveURL, id)
			}
			if err != nil {
				return err
			}
			if asJSON {
				if obj, err = archiveJSON(obj); err != nil {
					return err
				}
			}
			if out == "" {
				_, err = cmd.OutOrStdout().Write(obj)
				return err
			}
			if err := os.WriteFile(out, obj, 0o644); err != nil {
				return fmt.Errorf("write the export: %v", err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&archiveURL, "archive-url", "", "the archive to read a session from once the cluster no longer holds it (file:///DIR, s3://BUCKET, gs://BUCKET, azblob://CONTAINER)")
	cmd.Flags().StringVar(&out, "out", "", "write the export to this file instead of standard output")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the session as JSON instead of the archive format")
	return cmd
}

// exportFromCluster reads session id from the node that serves clients;
// archive.ErrNotFound when the cluster does not hold it.
func (g *globals) exportFromCluster(ctx context.Context, id string) ([]byte, error) {
	// One small read finds the leader, or says why none answers, and
	// whether the session is there.
	notFound := ""
	err := g.onLeader(ctx, func(ctx context.Context, conn *grpc.ClientConn, tr grpc.CallOption) error {
		_, err := sessions(conn).GetSession(ctx, &dexv1.GetSessionRequest{SessionId: id, HistoryLimit: 1, StepsLimit: 1}, tr)
		if status.Code(err) == codes.NotFound {
			notFound = status.Convert(err).Message()
			return nil
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if notFound != "" {
		return nil, notInCluster(notFound)
	}
	addrs, err := g.list()
	if err != nil {
		return nil, err
	}
	conn, err := client.Dial("dex:///"+strings.Join(addrs, ","), append(g.tls.dialOptions(), g.tokenOption())...)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, exportTimeout)
	defer cancel()
	return archive.FromAPI(ctx, client.New(conn), id)
}

// notInCluster is the cluster's NotFound answer; it matches
// archive.ErrNotFound.
type notInCluster string

func (e notInCluster) Error() string        { return string(e) }
func (e notInCluster) Is(target error) bool { return target == archive.ErrNotFound }

func exportFromArchive(ctx context.Context, rawURL, id string) ([]byte, error) {
	store, err := archive.Open(ctx, rawURL)
	if err != nil {
		return nil, err
	}
	defer store.Close()
	obj, err := store.Get(ctx, id)
	if errors.Is(err, archive.ErrNotFound) {
		return nil, fmt.Errorf("session %q is neither in the cluster nor in the archive %s", id, store.URL())
	}
	return obj, err
}

// archiveJSON is the readable form of an archived session, indented.
func archiveJSON(obj []byte) ([]byte, error) {
	s, err := format.Decode(obj)
	if err != nil {
		return nil, err
	}
	raw, err := protojson.Marshal(s)
	if err != nil {
		return nil, err
	}
	// protojson's spacing varies on purpose; the output here does not.
	var out bytes.Buffer
	if err := json.Indent(&out, raw, "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}
