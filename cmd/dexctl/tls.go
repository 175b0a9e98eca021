package main

import (
	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/dexhq/dex/api/client"
	"github.com/dexhq/dex/api/tlsconf"
)

// tlsFlags are the mutual-TLS flags, the same on every Dex binary.
type tlsFlags struct {
	files tlsconf.Files
	store *tlsconf.Store
}

func (t *tlsFlags) register(cmd *cobra.Command) {
	f := cmd.PersistentFlags()
	f.StringVar(&t.files.Cert, "tls-cert", "", "client certificate (PEM, as made by dexctl tls cert create --client) for a cluster with mutual TLS, with --tls-key and --tls-ca")
	f.StringVar(&t.files.Key, "tls-key", "", "the key of --tls-cert (PEM)")
	f.StringVar(&t.files.CA, "tls-ca", "", "the CA bundle (PEM) the nodes' certificates chain to")
}

// load reads the files once, before any command dials.
func (t *tlsFlags) load() error {
	s, err := tlsconf.Load(t.files)
	t.store = s
	return err
}

// creds are the transport credentials of a connection to one node.
func (t *tlsFlags) creds() grpc.DialOption {
	if t.store == nil {
		return grpc.WithTransportCredentials(insecure.NewCredentials())
	}
	return grpc.WithTransportCredentials(t.store.ClientCredentials())
}

// dialOptions are client.Dial's options.
func (t *tlsFlags) dialOptions() []grpc.DialOption { return client.DialOptions(t.store) }
