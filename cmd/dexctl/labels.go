package main

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// parseLabels reads KEY=VALUE arguments (--label or the label command's);
// the cluster checks the keys and values.
func parseLabels(what string, args []string) ([]*dexv1.Label, error) {
	var out []*dexv1.Label
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok || k == "" {
			return nil, usagef("%s %q: write KEY=VALUE", what, a)
		}
		out = append(out, &dexv1.Label{Key: k, Value: v})
	}
	return out, nil
}

// labelsMap is labels as JSON shows them.
func labelsMap(ls []*dexv1.Label) map[string]string {
	if len(ls) == 0 {
		return nil
	}
	m := make(map[string]string, len(ls))
	for _, l := range ls {
		m[l.Key] = l.Value
	}
	return m
}

// labelsLine is labels as k=v,k=v in key order ("-" for none).
func labelsLine(m map[string]string) string {
	if len(m) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = safe(k + "=" + m[k])
	}
	return strings.Join(parts, ",")
}

func newSessionLabelCmd(g *globals) *cobra.Command {
	var remove []string
	var asJSON bool
	var bulk bulkFilter
	cmd := &cobra.Command{
		Use:   "label ID [KEY=VALUE…] [--remove KEY…] | label --filter ... KEY=VALUE…",
		Short: "Set or remove a session's labels, or set labels on every session a filter matches",
		Long: `Set labels of a session (KEY=VALUE, replacing a key's value) and remove
others (--remove KEY, repeatable), in one change. A key is at most 63 bytes
of a-z, 0-9 and "._/-", beginning with a letter or digit; a value at most
256 bytes; a session holds at most 32 labels.

With a filter instead of an ID (--filter, --label, --agent, --status, --since,
...; --all for every session) it starts a bulk job that sets the KEY=VALUE
labels on every session the filter matches (docs/bulk.md): --label selects
the sessions, the arguments are the labels set. A job only sets labels:
--remove takes an ID.`,
		Args: cobra.ArbitraryArgs,
		RunE: bulkOrOne(g, &bulk, dexv1.BulkAction_BULK_ACTION_LABEL, func(req *dexv1.StartBulkActionRequest, args []string) ([]string, error) {
			for _, a := range args {
				if !strings.Contains(a, "=") {
					return nil, usagef("give a session ID or a filter, not both: with a filter the arguments are the KEY=VALUE labels to set (%q is not one)", a)
				}
			}
			if len(remove) > 0 {
				return nil, usagef("--remove takes a session ID: a label job by filter only sets labels")
			}
			set, err := parseLabels("label", args)
			if err != nil {
				return nil, err
			}
			if len(set) == 0 {
				return nil, usagef("a label job needs KEY=VALUE labels to set")
			}
			req.Labels = set
			return nil, nil
		}, func(cmd *cobra.Command, args []string) error {
			set, err := parseLabels("label", args[1:])
			if err != nil {
				return err
			}
			if len(set) == 0 && len(remove) == 0 {
				return usagef("give KEY=VALUE to set or --remove KEY")
			}
			var s *dexv1.Session
			err = g.onLeader(cmd.Context(), func(ctx context.Context, conn *grpc.ClientConn, tr grpc.CallOption) error {
				r, err := sessions(conn).SetLabels(ctx, &dexv1.SetLabelsRequest{SessionId: args[0], Set: set, Remove: remove}, tr)
				s = r.GetSession()
				return err
			})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), map[string]any{"id": args[0], "labels": labelsMap(s.GetLabels())})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s labels: %s\n", safe(args[0]), labelsLine(labelsMap(s.GetLabels())))
			return nil
		}),
	}
	cmd.Flags().StringArrayVar(&remove, "remove", nil, "remove this label key (repeatable; with an ID only)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	addBulkFilterFlags(cmd, &bulk)
	return cmd
}
