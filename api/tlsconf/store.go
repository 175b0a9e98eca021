// Package tlsconf loads a node's or a client's TLS files (--tls-cert,
// --tls-key, --tls-ca), reloads them on demand (SIGHUP), and builds the
// mutual-TLS configurations of Dex's gRPC, raft and HTTP ports.
//
// Every configuration reads the files' current contents at each handshake,
// so a reload takes effect for new connections without restarting a
// listener (and without dropping raft leadership); connections already
// open keep the certificates they were made with.
package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
)

// Files names the three PEM files. All three or none are given.
type Files struct {
	Cert, Key, CA string
}

// Enabled reports whether any file is given.
func (f Files) Enabled() bool { return f.Cert != "" || f.Key != "" || f.CA != "" }

// Validate checks that the files come together.
func (f Files) Validate() error {
	if !f.Enabled() {
		return nil
	}
	var missing []string
	for _, x := range []struct{ flag, v string }{{"--tls-cert", f.Cert}, {"--tls-key", f.Key}, {"--tls-ca", f.CA}} {
		if x.v == "" {
			missing = append(missing, x.flag)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("mutual TLS needs --tls-cert, --tls-key and --tls-ca together; missing %s", strings.Join(missing, ", "))
	}
	return nil
}

// material is one consistent load of the files.
type material struct {
	cert *tls.Certificate
	pool *x509.CertPool
}

// Store holds the current certificate, key and CA pool.
type Store struct {
	files Files
	mu    sync.RWMutex
	cur   material
}

// Load reads the files; nil, nil when none is given (TLS off).
func Load(f Files) (*Store, error) {
	if !f.Enabled() {
		return nil, nil
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	m, err := read(f)
	if err != nil {
		return nil, err
	}
	return &Store{files: f, cur: m}, nil
}

// Files are the files the store reads.
func (s *Store) Files() Files { return s.files }

// Reload reads the files again. On an error the store keeps what it had,
// so a half-written rotation never takes a node's TLS down.
func (s *Store) Reload() error {
	m, err := read(s.files)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.cur = m
	s.mu.Unlock()
	return nil
}

func (s *Store) current() material {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.cur
}

// Certificate is the current certificate (leaf parsed).
func (s *Store) Certificate() *tls.Certificate { return s.current().cert }

func read(f Files) (material, error) {
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return material{}, fmt.Errorf("--tls-cert %s / --tls-key %s: %v", f.Cert, f.Key, err)
	}
	if cert.Leaf == nil && len(cert.Certificate) > 0 {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return material{}, fmt.Errorf("--tls-cert %s: %v", f.Cert, err)
		}
	}
	caPEM, err := os.ReadFile(f.CA)
	if err != nil {
		return material{}, fmt.Errorf("--tls-ca: %v", err)
	}
	pool := x509.NewCertPool()
	n := 0
	for rest := caPEM; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return material{}, fmt.Errorf("--tls-ca %s: %v", f.CA, err)
		}
		pool.AddCert(c)
		n++
	}
	if n == 0 {
		return material{}, fmt.Errorf("--tls-ca %s holds no PEM certificate", f.CA)
	}
	return material{cert: &cert, pool: pool}, nil
}

// errNotANode refuses a raft peer whose certificate is not a node's.
var errNotANode = errors.New("the peer's certificate is not a Dex node certificate (no server auth usage): only nodes may speak raft")

// ServerConfig is a listener's configuration: this node's current
// certificate, and a client certificate signed by the current CA pool is
// required. nextProtos are the ALPN protocols offered ("h2" for gRPC).
func (s *Store) ServerConfig(nextProtos ...string) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: nextProtos,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return s.serverConfigNow(nextProtos, tls.RequireAndVerifyClientCert, false), nil
		},
	}
}

// PeerServerConfig is the raft listener's configuration: as ServerConfig,
// and the client must hold a node certificate (server auth usage), so a
// Worker's or an operator's client certificate cannot speak raft.
func (s *Store) PeerServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return s.serverConfigNow(nil, tls.RequireAndVerifyClientCert, true), nil
		},
	}
}

// HTTPServerConfig serves HTTPS with this node's certificate without
// asking for a client certificate: load balancers check /healthz and
// /readyz over it.
func (s *Store) HTTPServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return s.serverConfigNow([]string{"h2", "http/1.1"}, tls.VerifyClientCertIfGiven, false), nil
		},
	}
}

func (s *Store) serverConfigNow(nextProtos []string, auth tls.ClientAuthType, nodesOnly bool) *tls.Config {
	m := s.current()
	c := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{*m.cert},
		ClientCAs:    m.pool,
		ClientAuth:   auth,
		NextProtos:   nextProtos,
	}
	if nodesOnly {
		c.VerifyPeerCertificate = func(_ [][]byte, chains [][]*x509.Certificate) error {
			if len(chains) == 0 || !hasUsage(chains[0][0], x509.ExtKeyUsageServerAuth) {
				return errNotANode
			}
			return nil
		}
	}
	return c
}

func hasUsage(c *x509.Certificate, u x509.ExtKeyUsage) bool {
	if len(c.ExtKeyUsage) == 0 {
		return true
	}
	for _, x := range c.ExtKeyUsage {
		if x == u || x == x509.ExtKeyUsageAny {
			return true
		}
	}
	return false
}

// ClientConfig is a dialer's configuration for the server named
// serverName (a host name or an IP address, checked against the server
// certificate): the current CA pool and this side's current certificate.
// Each dial takes a fresh one.
func (s *Store) ClientConfig(serverName string) *tls.Config {
	m := s.current()
	cert := m.cert
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		ServerName: serverName,
		RootCAs:    m.pool,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return cert, nil
		},
	}
}
