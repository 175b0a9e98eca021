package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// tokenOption sends --token (or $DEX_TOKEN) on every call.
func (g *globals) tokenOption() grpc.DialOption { return client.WithToken(client.TokenFrom(g.token)) }

func (t trailerClient) CreateToken(ctx context.Context, in *dexv1.CreateTokenRequest, opts ...grpc.CallOption) (*dexv1.CreateTokenResponse, error) {
	return t.AdminServiceClient.CreateToken(ctx, in, append(opts, t.trailer)...)
}

func (t trailerClient) RevokeToken(ctx context.Context, in *dexv1.RevokeTokenRequest, opts ...grpc.CallOption) (*dexv1.RevokeTokenResponse, error) {
	return t.AdminServiceClient.RevokeToken(ctx, in, append(opts, t.trailer)...)
}

func (t trailerClient) BootstrapACL(ctx context.Context, in *dexv1.BootstrapACLRequest, opts ...grpc.CallOption) (*dexv1.BootstrapACLResponse, error) {
	return t.AdminServiceClient.BootstrapACL(ctx, in, append(opts, t.trailer)...)
}

var roles = map[string]dexv1.TokenRole{
	"admin": dexv1.TokenRole_TOKEN_ROLE_ADMIN, "client": dexv1.TokenRole_TOKEN_ROLE_CLIENT, "worker": dexv1.TokenRole_TOKEN_ROLE_WORKER,
}

func roleString(r dexv1.TokenRole) string {
	return strings.ToLower(strings.TrimPrefix(r.String(), "TOKEN_ROLE_"))
}

type tokenJSON struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Role      string `json:"role"`
	WorkerID  string `json:"worker_id,omitempty"`
	CreatedAt string `json:"created_at"`
	Revoked   bool   `json:"revoked"`
	Secret    string `json:"secret,omitempty"`
}

func asTokenJSON(t *dexv1.AclToken, secret string) tokenJSON {
	return tokenJSON{ID: t.Id, Name: t.Name, Role: roleString(t.Role), WorkerID: t.WorkerId,
		CreatedAt: time.UnixMilli(t.CreatedAtMs).UTC().Format(time.RFC3339), Revoked: t.Revoked, Secret: secret}
}

// printSecret shows a new token once: the cluster keeps only its hash.
func printSecret(w io.Writer, asJSON bool, t *dexv1.AclToken, secret string) error {
	if asJSON {
		return json.NewEncoder(w).Encode(asTokenJSON(t, secret))
	}
	fmt.Fprintf(w, "id:     %s\nname:   %s\nrole:   %s\n", t.Id, t.Name, roleString(t.Role))
	if t.WorkerId != "" {
		fmt.Fprintf(w, "worker: %s\n", t.WorkerId)
	}
	fmt.Fprintf(w, "secret: %s\n(shown once: the cluster keeps only its hash; pass it as --token or $DEX_TOKEN)\n", secret)
	return nil
}

func newTokenCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "Create, list and revoke ACL tokens (admin)"}

	var role, name, worker string
	var createJSON bool
	create := &cobra.Command{
		Use:   "create --role admin|client|worker --name NAME",
		Short: "Create a token and print its secret (shown once)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, ok := roles[role]
			if !ok {
				return fmt.Errorf("--role %q: use admin, client or worker", role)
			}
			if name == "" {
				return fmt.Errorf("--name is required")
			}
			var resp *dexv1.CreateTokenResponse
			err := g.leader(cmd.Context(), func(ctx context.Context, c dexv1.AdminServiceClient) error {
				var err error
				resp, err = c.CreateToken(ctx, &dexv1.CreateTokenRequest{Name: name, Role: r, WorkerId: worker})
				return err
			})
			if err != nil {
				return err
			}
			return printSecret(cmd.OutOrStdout(), createJSON, resp.Token, resp.Secret)
		},
	}
	create.Flags().StringVar(&role, "role", "", "admin (everything), client (sessions) or worker (tasks)")
	create.Flags().StringVar(&name, "name", "", "what the token is for")
	create.Flags().StringVar(&worker, "worker-id", "", "worker tokens: the only Worker id the token may act as")
	create.Flags().BoolVar(&createJSON, "json", false, "print JSON")

	var listJSON bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List the tokens (without secrets)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var resp *dexv1.ListTokensResponse
			err := g.anyNode(cmd.Context(), func(ctx context.Context, c dexv1.AdminServiceClient) error {
				var err error
				resp, err = c.ListTokens(ctx, &dexv1.ListTokensRequest{})
				return err
			})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if listJSON {
				rows := []tokenJSON{}
				for _, t := range resp.Tokens {
					rows = append(rows, asTokenJSON(t, ""))
				}
				return json.NewEncoder(out).Encode(rows)
			}
			fmt.Fprintf(out, "%-20s %-8s %-10s %-20s %-7s %s\n", "ID", "ROLE", "WORKER", "CREATED", "REVOKED", "NAME")
			for _, t := range resp.Tokens {
				fmt.Fprintf(out, "%-20s %-8s %-10s %-20s %-7v %s\n", t.Id, roleString(t.Role), t.WorkerId,
					time.UnixMilli(t.CreatedAtMs).UTC().Format(time.RFC3339), t.Revoked, t.Name)
			}
			return nil
		},
	}
	list.Flags().BoolVar(&listJSON, "json", false, "print JSON")

	revoke := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a token on every node",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			err := g.leader(cmd.Context(), func(ctx context.Context, c dexv1.AdminServiceClient) error {
				_, err := c.RevokeToken(ctx, &dexv1.RevokeTokenRequest{TokenId: args[0]})
				return err
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "token %s revoked\n", args[0])
			return nil
		},
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}

func newACLCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "acl", Short: "ACL setup"}
	var asJSON bool
	boot := &cobra.Command{
		Use:   "bootstrap",
		Short: "Make the first admin token (works once, while the cluster has no token)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var resp *dexv1.BootstrapACLResponse
			err := g.leader(cmd.Context(), func(ctx context.Context, c dexv1.AdminServiceClient) error {
				var err error
				resp, err = c.BootstrapACL(ctx, &dexv1.BootstrapACLRequest{})
				return err
			})
			if err != nil {
				return err
			}
			return printSecret(cmd.OutOrStdout(), asJSON, resp.Token, resp.Secret)
		},
	}
	boot.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.AddCommand(boot)
	return cmd
}
