package harness

import (
	"os"
	"path/filepath"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/dexhq/dex/api/client"
	"github.com/dexhq/dex/api/tlsconf"
)

// TLSEnv, set to 1, makes every cluster and Worker of the harness use
// mutual TLS (make chaos with DEX_CHAOS_TLS=1).
const TLSEnv = "DEX_CHAOS_TLS"

// TLSFromEnv reports whether TLSEnv asks for mutual TLS.
func TLSFromEnv() bool { return os.Getenv(TLSEnv) == "1" }

// PKI is a CA with one node certificate (shared by the loopback nodes)
// and one client certificate, made the way an operator makes them.
type PKI struct {
	Dir    string
	client *tlsconf.Store
}

// NewPKI makes a CA, a node certificate "node" and a client certificate
// "client" in dir.
func NewPKI(dir string) (*PKI, error) {
	if _, _, err := tlsconf.CreateCA(dir); err != nil {
		return nil, err
	}
	if _, _, err := tlsconf.CreateCert(tlsconf.CertRequest{Server: true, Name: "node", CADir: dir}); err != nil {
		return nil, err
	}
	if _, _, err := tlsconf.CreateCert(tlsconf.CertRequest{Name: "client", CADir: dir}); err != nil {
		return nil, err
	}
	p := &PKI{Dir: dir}
	var err error
	p.client, err = tlsconf.Load(p.ClientFiles())
	return p, err
}

// CA is the CA bundle's path.
func (p *PKI) CA() string { return filepath.Join(p.Dir, tlsconf.CAFile) }

// NodeFiles are the nodes' files.
func (p *PKI) NodeFiles() tlsconf.Files {
	c, k := tlsconf.CertFiles(p.Dir, "server", "node")
	return tlsconf.Files{Cert: c, Key: k, CA: p.CA()}
}

// ClientFiles are the clients' and Workers' files.
func (p *PKI) ClientFiles() tlsconf.Files {
	c, k := tlsconf.CertFiles(p.Dir, "client", "client")
	return tlsconf.Files{Cert: c, Key: k, CA: p.CA()}
}

// Args are the --tls-* flags naming f.
func Args(f tlsconf.Files) []string {
	return []string{"--tls-cert", f.Cert, "--tls-key", f.Key, "--tls-ca", f.CA}
}

// Client is the client certificate's store.
func (p *PKI) Client() *tlsconf.Store { return p.client }

// TLS is the cluster's PKI, nil without TLS.
func (c *Cluster) TLS() *PKI { return c.opts.TLS }

// DialOptions are client.Dial's options for this cluster: TLS and the
// admin token when they are on (none without).
func (c *Cluster) DialOptions() []grpc.DialOption {
	if c.opts.TLS == nil {
		return c.tokenOptions()
	}
	return append(client.DialOptions(c.opts.TLS.client), c.tokenOptions()...)
}

// Creds are the transport credentials of a plain gRPC connection to one
// node of this cluster.
func (c *Cluster) Creds() grpc.DialOption {
	if c.opts.TLS == nil {
		return grpc.WithTransportCredentials(insecure.NewCredentials())
	}
	return grpc.WithTransportCredentials(c.opts.TLS.client.ClientCredentials())
}
