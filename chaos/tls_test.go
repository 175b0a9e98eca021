//go:build e2e

package chaos

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/tlsconf"
	"github.com/dexhq/dex/chaos/harness"
	"github.com/dexhq/dex/cluster"
)

func newMTLSEnv(t *testing.T) *env {
	t.Helper()
	return newEnvTLS(t, func(dir string) *harness.PKI {
		p, err := harness.NewPKI(filepath.Join(dir, "tls"))
		if err != nil {
			t.Fatal(err)
		}
		return p
	})
}

// leaderAndTerm is what the cluster reports as its leader and term.
func (e *env) leaderAndTerm() (string, uint64) {
	e.t.Helper()
	st, err := dexv1.NewAdminServiceClient(e.conn).Status(e.ctx(10*time.Second), &dexv1.StatusRequest{}, grpc.WaitForReady(true))
	if err != nil {
		e.t.Fatalf("status: %v", err)
	}
	return st.Leader, st.Term
}

// runDemo runs the demo session end to end and checks every Step succeeded.
func (e *env) runDemo() {
	e.t.Helper()
	id := e.createSession("demo")
	r := e.waitStatus(id, sIdle, 30*time.Second)
	if len(r.Steps) < 3 {
		e.t.Fatalf("session %s ran %d Steps; the demo runs at least 3", id, len(r.Steps))
	}
	for _, st := range r.Steps {
		if st.Outcome != dexv1.Outcome_OUTCOME_SUCCEEDED {
			e.t.Fatalf("step %s (%s %s) is %v; want succeeded", st.Id, st.Kind, st.Tool, st.Outcome)
		}
	}
}

// The check: a cluster with mutual TLS runs the demo session end
// to end, with a dexworker and dexctl on client certificates.
func TestTLS_ClusterRunsTheDemoSession(t *testing.T) {
	e := newMTLSEnv(t)
	e.startWorker("")
	e.runDemo()
	var st struct {
		Leader string `json:"leader"`
	}
	e.dexctl(&st, "status", "--json")
	if st.Leader == "" {
		t.Fatal("dexctl status over TLS names no leader")
	}
}

// A process without a client certificate of the cluster's CA reaches
// neither gRPC nor raft, and the cluster keeps its leader.
func TestTLS_NoCertificateNoConnection(t *testing.T) {
	e := newMTLSEnv(t)
	leader, term := e.leaderAndTerm()
	n := e.cluster.Nodes[0]

	grpcRefused := func(what string, creds credentials.TransportCredentials) {
		t.Helper()
		conn, err := grpc.NewClient(n.GRPCAddr, grpc.WithTransportCredentials(creds))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err == nil {
			t.Fatalf("gRPC %s: a health check got through", what)
		}
	}
	grpcRefused("in plaintext", insecure.NewCredentials())
	pool := x509.NewCertPool()
	ca, _ := os.ReadFile(e.cluster.TLS().CA())
	pool.AppendCertsFromPEM(ca)
	grpcRefused("over TLS without a client certificate", credentials.NewTLS(&tls.Config{RootCAs: pool}))
	other, err := harness.NewPKI(filepath.Join(e.dir, "other"))
	if err != nil {
		t.Fatal(err)
	}
	grpcRefused("with a certificate of another CA", other.Client().ClientCredentials())

	// Raft: plaintext, a client (not node) certificate, another CA's node.
	if id, err := cluster.ProbeClusterID(n.RaftAddr, 3*time.Second); err == nil {
		t.Fatalf("a plaintext probe of the raft port answered cluster %q", id)
	}
	if _, err := cluster.ProbeClusterIDTLS(n.RaftAddr, e.cluster.TLS().Client(), 3*time.Second); err == nil {
		t.Fatal("a client certificate spoke to the raft port")
	}
	foreignNode, err := tlsconf.Load(other.NodeFiles())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.ProbeClusterIDTLS(n.RaftAddr, foreignNode, 3*time.Second); err == nil {
		t.Fatal("a node certificate of another CA spoke to the raft port")
	}
	trans, err := cluster.NewPeerTransport("")
	if err != nil {
		t.Fatal(err)
	}
	defer trans.Close()
	var resp raft.RequestVoteResponse
	if err := trans.RequestVote(raft.ServerID(n.ID), raft.ServerAddress(n.RaftAddr), &raft.RequestVoteRequest{
		RPCHeader: raft.RPCHeader{ID: []byte("rogue"), Addr: []byte(trans.LocalAddr())}, Term: term + 100, LastLogIndex: 1 << 40, LastLogTerm: term + 100,
	}, &resp); err == nil {
		t.Fatalf("a plaintext RequestVote got an answer (granted=%v)", resp.Granted)
	}

	// The node with a certificate of the CA answers, and nothing moved.
	own, err := tlsconf.Load(e.cluster.TLS().NodeFiles())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.ProbeClusterIDTLS(n.RaftAddr, own, 3*time.Second); err != nil {
		t.Fatalf("a probe with the cluster's node certificate failed: %v", err)
	}
	if l, tm := e.leaderAndTerm(); l != leader || tm != term {
		t.Fatalf("leader %s term %d after the attempts; was %s term %d", l, tm, leader, term)
	}
}

// servedSerial is the serial number of the certificate addr serves now.
func servedSerial(t *testing.T, addr string, s *tlsconf.Store) string {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 3 * time.Second}, "tcp", addr, s.ClientConfig("127.0.0.1"))
	if err != nil {
		t.Fatalf("TLS to %s: %v", addr, err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

// waitReloaded waits until every node logged its n-th TLS reload.
func (e *env) waitReloaded(n int) {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, node := range e.cluster.Nodes {
		for strings.Count(node.Log(), "SIGHUP: TLS files reloaded") < n {
			if time.Now().After(deadline) {
				e.t.Fatalf("%s did not log its TLS reload", node.ID)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

func (e *env) sighupAll() {
	e.t.Helper()
	for _, n := range e.cluster.Nodes {
		if err := n.Signal(syscall.SIGHUP); err != nil {
			e.t.Fatal(err)
		}
	}
}

// Certificates rotated on every node with SIGHUP, first from the same CA,
// then to a new CA through a bundle of both, keep the cluster serving with
// the same leader.
func TestTLS_RotationWithSIGHUPKeepsServing(t *testing.T) {
	e := newMTLSEnv(t)
	pki := e.cluster.TLS()
	e.startWorker("")
	e.runDemo()
	leader, term := e.leaderAndTerm()
	nodeFiles := pki.NodeFiles()
	cli := pki.Client()
	before := servedSerial(t, e.cluster.Nodes[0].GRPCAddr, cli)

	// 1. A new node certificate from the same CA.
	next := filepath.Join(e.dir, "next")
	c, k, err := tlsconf.CreateCert(tlsconf.CertRequest{Server: true, Name: "node", CADir: pki.Dir, OutDir: next})
	if err != nil {
		t.Fatal(err)
	}
	copyInto(t, c, nodeFiles.Cert)
	copyInto(t, k, nodeFiles.Key)
	e.sighupAll()
	e.waitReloaded(1)
	for _, n := range e.cluster.Nodes {
		if s := servedSerial(t, n.GRPCAddr, cli); s == before {
			t.Fatalf("%s serves the old certificate on gRPC after SIGHUP", n.ID)
		}
	}
	e.runDemo()

	// 2. A new CA: the bundle holds both, the nodes take certificates of
	// the new one; clients of the old CA keep working and so do new ones.
	ca2 := filepath.Join(e.dir, "ca2")
	if _, _, err := tlsconf.CreateCA(ca2); err != nil {
		t.Fatal(err)
	}
	oldCA, _ := os.ReadFile(pki.CA())
	newCA, _ := os.ReadFile(filepath.Join(ca2, tlsconf.CAFile))
	if err := os.WriteFile(pki.CA(), append(oldCA, newCA...), 0o644); err != nil {
		t.Fatal(err)
	}
	c, k, err = tlsconf.CreateCert(tlsconf.CertRequest{Server: true, Name: "node", CADir: ca2})
	if err != nil {
		t.Fatal(err)
	}
	copyInto(t, c, nodeFiles.Cert)
	copyInto(t, k, nodeFiles.Key)
	e.sighupAll()
	e.waitReloaded(2)
	if err := cli.Reload(); err != nil { // the harness's own client takes the bundle
		t.Fatal(err)
	}
	// A Worker started now dials with the old CA's client certificate.
	e.workers[len(e.workers)-1].Kill()
	e.startWorker("")
	e.runDemo()
	c2, k2, err := tlsconf.CreateCert(tlsconf.CertRequest{Name: "newclient", CADir: ca2})
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := tlsconf.Load(tlsconf.Files{Cert: c2, Key: k2, CA: pki.CA()})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := client.Dial(e.cluster.Target(), client.WithTLS(fresh))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := dexv1.NewAdminServiceClient(conn).Status(e.ctx(10*time.Second), &dexv1.StatusRequest{}, grpc.WaitForReady(true)); err != nil {
		t.Fatalf("a client of the new CA: %v", err)
	}
	if l, tm := e.leaderAndTerm(); l != leader || tm != term {
		t.Fatalf("leader %s term %d after the rotations; was %s term %d", l, tm, leader, term)
	}
}

func copyInto(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
