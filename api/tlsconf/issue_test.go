package tlsconf

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCreateCertNamesAndProtectsItsFiles(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := CreateCA(dir); err != nil {
		t.Fatal(err)
	}
	c, k, err := CreateCert(CertRequest{Server: true, Name: "n2", CADir: dir, IPs: []net.IP{net.ParseIP("10.0.0.2")}, DNS: []string{"dex-2.internal"}})
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(c) != "n2-server.pem" || filepath.Base(k) != "n2-server-key.pem" {
		t.Fatalf("files %s %s", c, k)
	}
	for _, p := range []string{k, filepath.Join(dir, CAKeyFile)} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Fatalf("%s has mode %v, want 0600", p, st.Mode().Perm())
		}
	}
	s, err := Load(Files{Cert: c, Key: k, CA: filepath.Join(dir, CAFile)})
	if err != nil {
		t.Fatal(err)
	}
	leaf := s.Certificate().Leaf
	pub, ok := leaf.PublicKey.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		t.Fatal("not an ECDSA P-256 key")
	}
	for _, name := range []string{"10.0.0.2", "127.0.0.1", "dex-2.internal", "localhost"} {
		if err := leaf.VerifyHostname(name); err != nil {
			t.Errorf("the server certificate does not name %s: %v", name, err)
		}
	}
	if !hasUsage(leaf, x509.ExtKeyUsageServerAuth) || !hasUsage(leaf, x509.ExtKeyUsageClientAuth) {
		t.Error("a node certificate must serve and dial")
	}
}

func TestCreateRefusesToOverwriteAndBadNames(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := CreateCA(dir); err != nil {
		t.Fatal(err)
	}
	if _, _, err := CreateCA(dir); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("a second CA over the first: %v", err)
	}
	if _, _, err := CreateCert(CertRequest{Name: "w1", CADir: dir}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := CreateCert(CertRequest{Name: "w1", CADir: dir}); err == nil {
		t.Fatal("a certificate was overwritten")
	}
	if _, _, err := CreateCert(CertRequest{Name: "../x", CADir: dir}); err == nil {
		t.Fatal("a name with a path was accepted")
	}
	if _, _, err := CreateCert(CertRequest{Name: "w2", CADir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "tls ca create") {
		t.Fatalf("no CA: %v", err)
	}
}
