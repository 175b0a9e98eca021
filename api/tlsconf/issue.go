package tlsconf

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"time"
)

// File names written by CreateCA and CreateCert.
const (
	CAFile    = "dex-ca.pem"
	CAKeyFile = "dex-ca-key.pem"
)

// Validity of what CreateCA and CreateCert make.
const (
	CAValidity   = 5 * 365 * 24 * time.Hour
	CertValidity = 365 * 24 * time.Hour
)

// CertFiles names the certificate and key of NAME's KIND ("server" or
// "client") certificate: NAME-KIND.pem and NAME-KIND-key.pem.
func CertFiles(dir, kind, name string) (cert, key string) {
	return filepath.Join(dir, name+"-"+kind+".pem"), filepath.Join(dir, name+"-"+kind+"-key.pem")
}

// CreateCA writes a new CA (ECDSA P-256) to dir: dex-ca.pem and
// dex-ca-key.pem (0600). It refuses to overwrite an existing CA.
func CreateCA(dir string) (certPath, keyPath string, err error) {
	certPath, keyPath = filepath.Join(dir, CAFile), filepath.Join(dir, CAKeyFile)
	if err := refuseExisting(certPath, keyPath); err != nil {
		return "", "", err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "Dex CA", Organization: []string{"Dex"}},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	if err := writePair(certPath, keyPath, der, key); err != nil {
		return "", "", err
	}
	return certPath, keyPath, nil
}

// CertRequest describes a certificate to make.
type CertRequest struct {
	// Server makes a node certificate (server and client auth: a node
	// serves gRPC and raft and dials its peers); otherwise a client one.
	Server bool
	Name   string
	IPs    []net.IP
	DNS    []string
	// CADir holds dex-ca.pem and dex-ca-key.pem; OutDir receives the files
	// (CADir when empty).
	CADir, OutDir string
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// CreateCert writes a certificate signed by the CA in r.CADir. A server
// certificate always names localhost and 127.0.0.1 too, so a node can be
// reached on loopback.
func CreateCert(r CertRequest) (certPath, keyPath string, err error) {
	if !nameRE.MatchString(r.Name) {
		return "", "", fmt.Errorf("name %q: use letters, digits, '.', '_' or '-' (e.g. n1, worker-1)", r.Name)
	}
	caCert, caKey, err := readCA(r.CADir)
	if err != nil {
		return "", "", err
	}
	kind := "client"
	usage := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	ips, dns := r.IPs, r.DNS
	if r.Server {
		kind = "server"
		usage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		ips = append(append([]net.IP{}, ips...), net.IPv4(127, 0, 0, 1))
		dns = append(append([]string{}, dns...), "localhost")
	}
	out := r.OutDir
	if out == "" {
		out = r.CADir
	}
	certPath, keyPath = CertFiles(out, kind, r.Name)
	if err := refuseExisting(certPath, keyPath); err != nil {
		return "", "", err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: r.Name, Organization: []string{"Dex"}, OrganizationalUnit: []string{kind}},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(CertValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usage,
		IPAddresses:  ips,
		DNSNames:     dns,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return "", "", err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", "", err
	}
	if err := writePair(certPath, keyPath, der, key); err != nil {
		return "", "", err
	}
	return certPath, keyPath, nil
}

func readCA(dir string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, CAFile))
	if err != nil {
		return nil, nil, fmt.Errorf("reading the CA (make one with `dexctl tls ca create`): %v", err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, CAKeyFile))
	if err != nil {
		return nil, nil, fmt.Errorf("reading the CA key: %v", err)
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, nil, fmt.Errorf("%s: the CA files are not PEM", dir)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("the CA certificate: %v", err)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("the CA key: %v", err)
	}
	return cert, key, nil
}

func writePair(certPath, keyPath string, der []byte, key *ecdsa.PrivateKey) error {
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

func refuseExisting(paths ...string) error {
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			return fmt.Errorf("%s already exists: not overwriting it", p)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err)
	}
	return n
}
