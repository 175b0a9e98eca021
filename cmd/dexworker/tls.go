package main

import (
	"flag"

	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/dexhq/dex/api/client"
	"github.com/dexhq/dex/api/tlsconf"
)

// registerTLS adds the mutual-TLS flags, the same on every Dex binary.
func registerTLS(fs *flag.FlagSet, f *tlsconf.Files) {
	fs.StringVar(&f.Cert, "tls-cert", "", "client certificate (PEM, as made by dexctl tls cert create --client) for a cluster with mutual TLS, with --tls-key and --tls-ca; reloaded on SIGHUP")
	fs.StringVar(&f.Key, "tls-key", "", "the key of --tls-cert (PEM)")
	fs.StringVar(&f.CA, "tls-ca", "", "the CA bundle (PEM) the nodes' certificates chain to")
}

// dialTLS loads the files (none: plaintext) and reloads them on SIGHUP, so
// a rotated certificate is used from the next connection on.
func dialTLS(f tlsconf.Files, log *zap.Logger) ([]grpc.DialOption, func(), error) {
	s, err := tlsconf.Load(f)
	if err != nil || s == nil {
		return nil, func() {}, err
	}
	stop := s.ReloadOnSIGHUP(func(err error) {
		if err != nil {
			log.Error("SIGHUP: reloading the TLS files failed; the current ones stay in use", zap.Error(err))
			return
		}
		log.Info("SIGHUP: TLS files reloaded")
	})
	return client.DialOptions(s), stop, nil
}
