package main

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/dexhq/dex/api/tlsconf"
)

// newTLSCmd makes the files of a cluster with mutual TLS: one CA, then a
// certificate per node and per client.
func newTLSCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "tls", Short: "Make a CA and certificates for mutual TLS"}
	ca := &cobra.Command{Use: "ca", Short: "The certificate authority"}
	cert := &cobra.Command{Use: "cert", Short: "Node and client certificates"}
	ca.AddCommand(newTLSCACreateCmd())
	cert.AddCommand(newTLSCertCreateCmd())
	cmd.AddCommand(ca, cert)
	return cmd
}

// noDial: making files needs no cluster and no TLS flags.
func noDial(*cobra.Command, []string) error { return nil }

func newTLSCACreateCmd() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:               "create",
		Short:             "Make a new CA (ECDSA P-256, valid 5 years): dex-ca.pem and dex-ca-key.pem",
		Args:              cobra.NoArgs,
		PersistentPreRunE: noDial,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, k, err := tlsconf.CreateCA(dir)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "==> CA certificate %s\n==> CA key %s (keep it off the nodes)\n", c, k)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", ".", "directory to write the CA to")
	return cmd
}

func newTLSCertCreateCmd() *cobra.Command {
	var (
		server, client string
		ips, dns       []string
		caDir, outDir  string
	)
	cmd := &cobra.Command{
		Use:   "create --server NAME|--client NAME [--ip IP]... [--dns NAME]...",
		Short: "Make a certificate signed by the CA (ECDSA P-256, valid 1 year)",
		Long: `Make a certificate signed by the CA in --ca-dir.

--server NAME makes a node certificate (NAME-server.pem, NAME-server-key.pem):
give every address other nodes, clients and load balancers reach the node by
(--ip, --dns; localhost and 127.0.0.1 are always included). It serves gRPC and
raft and dials the other nodes.

--client NAME makes a client certificate (NAME-client.pem, NAME-client-key.pem)
for dexctl, a Worker or an application. It cannot speak raft.`,
		Args:              cobra.NoArgs,
		PersistentPreRunE: noDial,
		RunE: func(cmd *cobra.Command, args []string) error {
			if (server == "") == (client == "") {
				return errors.New("give exactly one of --server NAME or --client NAME")
			}
			req := tlsconf.CertRequest{Server: server != "", Name: server + client, DNS: dns, CADir: caDir, OutDir: outDir}
			if client != "" && (len(ips) > 0 || len(dns) > 0) {
				return errors.New("--ip and --dns name a server: a client certificate takes neither")
			}
			for _, s := range ips {
				ip := net.ParseIP(s)
				if ip == nil {
					return fmt.Errorf("--ip %q is not an IP address", s)
				}
				req.IPs = append(req.IPs, ip)
			}
			c, k, err := tlsconf.CreateCert(req)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "==> certificate %s\n==> key %s\n==> CA %s\n", c, k, filepath.Join(caDir, tlsconf.CAFile))
			return nil
		},
	}
	cmd.Flags().StringVar(&server, "server", "", "make a node certificate for node NAME")
	cmd.Flags().StringVar(&client, "client", "", "make a client certificate named NAME")
	cmd.Flags().StringSliceVar(&ips, "ip", nil, "an IP address the node is reached at (repeat or comma separate)")
	cmd.Flags().StringSliceVar(&dns, "dns", nil, "a DNS name the node is reached at (repeat or comma separate)")
	cmd.Flags().StringVar(&caDir, "ca-dir", ".", "directory holding dex-ca.pem and dex-ca-key.pem")
	cmd.Flags().StringVar(&outDir, "dir", "", "directory to write the certificate to (default: --ca-dir)")
	return cmd
}
