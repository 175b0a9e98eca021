package main

import (
	"crypto/tls"
	"flag"
	"net"

	"go.uber.org/zap"

	"github.com/dexhq/dex/api/tlsconf"
)

// tlsOptions are the mutual-TLS flags, the same on every Dex binary.
type tlsOptions struct {
	files   tlsconf.Files
	httpTLS bool
}

func (t *tlsOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&t.files.Cert, "tls-cert", "", "this node's certificate (PEM, as made by dexctl tls cert create --server): turns on mutual TLS on the gRPC and raft ports, together with --tls-key and --tls-ca")
	fs.StringVar(&t.files.Key, "tls-key", "", "the key of --tls-cert (PEM)")
	fs.StringVar(&t.files.CA, "tls-ca", "", "the CA bundle (PEM) that client and peer certificates must chain to; reloaded with the certificate on SIGHUP")
	fs.BoolVar(&t.httpTLS, "http-tls", false, "serve the HTTP port (/healthz, /readyz, /metrics) over TLS with --tls-cert; no client certificate is asked, so load balancers can check it")
}

func (t *tlsOptions) validate() error {
	if err := t.files.Validate(); err != nil {
		return &usageError{err.Error()}
	}
	if t.httpTLS && !t.files.Enabled() {
		return &usageError{"--http-tls needs --tls-cert, --tls-key and --tls-ca"}
	}
	return nil
}

// loadTLS reads the files (nil when TLS is off) and reloads them on every
// SIGHUP; new connections take the new files, open ones and raft
// leadership are not touched.
func loadTLS(t tlsOptions, log *zap.Logger) (*tlsconf.Store, func(), error) {
	s, err := tlsconf.Load(t.files)
	if err != nil || s == nil {
		return nil, func() {}, err
	}
	stop := s.ReloadOnSIGHUP(func(err error) {
		if err != nil {
			log.Error("SIGHUP: reloading the TLS files failed; the current ones stay in use", zap.Error(err))
			return
		}
		log.Info("SIGHUP: TLS files reloaded", zap.String("cert", t.files.Cert), zap.String("ca", t.files.CA))
	})
	log.Info("mutual TLS on", zap.String("cert", t.files.Cert), zap.String("ca", t.files.CA), zap.Bool("http_tls", t.httpTLS))
	return s, stop, nil
}

// httpListener serves HTTPS when --http-tls is set.
func httpListener(ln net.Listener, s *tlsconf.Store, on bool) net.Listener {
	if s == nil || !on {
		return ln
	}
	return tls.NewListener(ln, s.HTTPServerConfig())
}
