package tlsconf

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// pki makes a CA and a server and a client certificate in a temp dir.
func pki(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if _, _, err := CreateCA(dir); err != nil {
		t.Fatal(err)
	}
	for _, server := range []bool{true, false} {
		if _, _, err := CreateCert(CertRequest{Server: server, Name: "n1", CADir: dir}); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func files(dir, kind string) Files {
	c, k := CertFiles(dir, kind, "n1")
	return Files{Cert: c, Key: k, CA: filepath.Join(dir, CAFile)}
}

func load(t *testing.T, f Files) *Store {
	t.Helper()
	s, err := Load(f)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// serve accepts TLS connections with cfg and completes their handshakes.
func serve(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				_ = c.(*tls.Conn).Handshake()
				buf := make([]byte, 1)
				_, _ = c.Read(buf)
				c.Close()
			}()
		}
	}()
	return ln.Addr().String()
}

// dial completes a handshake and a round trip; it returns the serial
// number of the server's certificate.
func dial(addr string, cfg *tls.Config) (string, error) {
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return "", err
	}
	defer c.Close()
	// TLS 1.3 reports a refused client certificate on the first read.
	if _, err := c.Write([]byte{1}); err != nil {
		return "", err
	}
	buf := make([]byte, 1)
	if _, err := c.Read(buf); err != nil && !strings.Contains(err.Error(), "EOF") {
		return "", err
	}
	return c.ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
}

func TestMutualTLSAcceptsAClientOfTheCA(t *testing.T) {
	dir := pki(t)
	srv, cli := load(t, files(dir, "server")), load(t, files(dir, "client"))
	addr := serve(t, srv.ServerConfig())
	got, err := dial(addr, cli.ClientConfig("127.0.0.1"))
	if err != nil {
		t.Fatalf("a client certificate of the CA was refused: %v", err)
	}
	if want := srv.Certificate().Leaf.SerialNumber.String(); got != want {
		t.Fatalf("served certificate %s, want %s", got, want)
	}
}

func TestServerRefusesAClientWithoutCertificate(t *testing.T) {
	dir := pki(t)
	srv := load(t, files(dir, "server"))
	addr := serve(t, srv.ServerConfig())
	cfg := srv.ClientConfig("127.0.0.1")
	cfg.GetClientCertificate = nil
	if _, err := dial(addr, cfg); err == nil {
		t.Fatal("a client without a certificate got through")
	}
}

func TestServerRefusesACertificateOfAnotherCA(t *testing.T) {
	dir, other := pki(t), pki(t)
	srv := load(t, files(dir, "server"))
	addr := serve(t, srv.ServerConfig())
	stranger := load(t, Files{Cert: files(other, "client").Cert, Key: files(other, "client").Key, CA: files(dir, "client").CA})
	if _, err := dial(addr, stranger.ClientConfig("127.0.0.1")); err == nil {
		t.Fatal("a certificate of another CA got through")
	}
}

func TestClientRefusesAServerNotNamedInItsCertificate(t *testing.T) {
	dir := pki(t)
	srv, cli := load(t, files(dir, "server")), load(t, files(dir, "client"))
	addr := serve(t, srv.ServerConfig())
	if _, err := dial(addr, cli.ClientConfig("db.example.com")); err == nil {
		t.Fatal("the client accepted a certificate that does not name the server")
	}
}

func TestRaftPortRefusesAClientCertificate(t *testing.T) {
	dir := pki(t)
	srv, cli := load(t, files(dir, "server")), load(t, files(dir, "client"))
	addr := serve(t, srv.PeerServerConfig())
	if _, err := dial(addr, cli.ClientConfig("127.0.0.1")); err == nil {
		t.Fatal("a client (non-node) certificate spoke to the raft port")
	}
	if _, err := dial(addr, srv.ClientConfig("127.0.0.1")); err != nil {
		t.Fatalf("a node certificate was refused on the raft port: %v", err)
	}
}

func TestReloadServesTheRotatedCertificate(t *testing.T) {
	dir := pki(t)
	srv, cli := load(t, files(dir, "server")), load(t, files(dir, "client"))
	addr := serve(t, srv.ServerConfig())
	before, err := dial(addr, cli.ClientConfig("127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	// A new certificate from the same CA replaces the files in place.
	next := t.TempDir()
	c, k, err := CreateCert(CertRequest{Server: true, Name: "n1", CADir: dir, OutDir: next})
	if err != nil {
		t.Fatal(err)
	}
	copyFile(t, c, files(dir, "server").Cert)
	copyFile(t, k, files(dir, "server").Key)
	if got, _ := dial(addr, cli.ClientConfig("127.0.0.1")); got != before {
		t.Fatal("the new files were served before the reload")
	}
	if err := srv.Reload(); err != nil {
		t.Fatal(err)
	}
	after, err := dial(addr, cli.ClientConfig("127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	if after == before {
		t.Fatal("the listener still serves the old certificate after the reload")
	}
}

func TestReloadTakesANewCABundle(t *testing.T) {
	dir, other := pki(t), pki(t)
	srv := load(t, files(dir, "server"))
	addr := serve(t, srv.ServerConfig())
	newClient := load(t, Files{Cert: files(other, "client").Cert, Key: files(other, "client").Key, CA: files(dir, "client").CA})
	if _, err := dial(addr, newClient.ClientConfig("127.0.0.1")); err == nil {
		t.Fatal("a certificate of the new CA got through before the bundle was loaded")
	}
	// The bundle holds the old CA and the new one.
	oldCA, _ := os.ReadFile(files(dir, "server").CA)
	newCA, _ := os.ReadFile(files(other, "server").CA)
	if err := os.WriteFile(files(dir, "server").CA, append(oldCA, newCA...), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := srv.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, err := dial(addr, newClient.ClientConfig("127.0.0.1")); err != nil {
		t.Fatalf("a certificate of the new CA was refused after the bundle was reloaded: %v", err)
	}
}

func TestAFailedReloadKeepsTheCurrentFiles(t *testing.T) {
	dir := pki(t)
	srv, cli := load(t, files(dir, "server")), load(t, files(dir, "client"))
	addr := serve(t, srv.ServerConfig())
	if err := os.WriteFile(files(dir, "server").Key, []byte("half written"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := srv.Reload(); err == nil {
		t.Fatal("a broken key reloaded without an error")
	}
	if _, err := dial(addr, cli.ClientConfig("127.0.0.1")); err != nil {
		t.Fatalf("a failed reload broke TLS: %v", err)
	}
}

func TestLoadErrors(t *testing.T) {
	dir := pki(t)
	f := files(dir, "server")
	if s, err := Load(Files{}); s != nil || err != nil {
		t.Fatalf("no files: want TLS off, got %v %v", s, err)
	}
	if _, err := Load(Files{Cert: f.Cert, Key: f.Key}); err == nil || !strings.Contains(err.Error(), "--tls-ca") {
		t.Fatalf("missing --tls-ca: %v", err)
	}
	if _, err := Load(Files{Cert: f.Cert, Key: f.Key, CA: f.Key}); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Fatalf("a CA file without certificates: %v", err)
	}
	if _, err := Load(Files{Cert: f.Cert, Key: files(dir, "client").Key, CA: f.CA}); err == nil {
		t.Fatal("a key that does not match the certificate loaded")
	}
	if _, err := Load(Files{Cert: filepath.Join(dir, "nope.pem"), Key: f.Key, CA: f.CA}); err == nil {
		t.Fatal("a missing certificate file loaded")
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
