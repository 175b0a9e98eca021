//go:build e2e

package kubernetes

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dexhq/dex/deploy/internal/binaries"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

// root is the repository.
var root = binaries.Root

func TestMain(m *testing.M) { binaries.Main(m) }

// genSecrets runs gen-secrets.sh with the built dexctl and returns its
// output; a non-zero exit fails the test unless wantFail.
func genSecrets(t *testing.T, wantFail bool, args ...string) string {
	t.Helper()
	cmd := exec.Command("./gen-secrets.sh", args...)
	cmd.Env = append(os.Environ(), "DEXCTL="+filepath.Join(binaries.Build(t), "dexctl"))
	out, err := cmd.CombinedOutput()
	if wantFail {
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
			t.Fatalf("gen-secrets.sh %v: %v, want exit 2\n%s", args, err, out)
		}
	} else if err != nil {
		t.Fatalf("gen-secrets.sh %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// generatedFile is the file the script wrote for a generator's KEY=PATH.
func generatedFile(out, path string) string {
	return filepath.Join(out, strings.TrimPrefix(path, secretsDir+"/"))
}

func readPEMCerts(t *testing.T, path string) []*x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var certs []*x509.Certificate
	for {
		var b *pem.Block
		if b, data = pem.Decode(data); b == nil {
			break
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		t.Fatalf("%s holds no certificate", path)
	}
	return certs
}

// leaf loads a Secret's tls.crt with its tls.key (they must match) and the
// pool of its ca.crt.
func leaf(t *testing.T, dir string) (*x509.Certificate, *x509.CertPool) {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	c, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	for _, ca := range readPEMCerts(t, filepath.Join(dir, "ca.crt")) {
		pool.AddCert(ca)
	}
	return c, pool
}

// nodeNames are the names a node is reached at in namespace: each pod of
// the headless Service in its four forms, the client Service in its four.
func nodeNames(namespace string, replicas int) []string {
	var names []string
	forms := func(host string) {
		names = append(names, host, host+"."+namespace, host+"."+namespace+".svc", host+"."+namespace+".svc.cluster.local")
	}
	for i := 0; i < replicas; i++ {
		forms(fmt.Sprintf("%s-%d.%s", nodesName, i, peersName))
	}
	forms(nodesName)
	return append(names, "localhost", "127.0.0.1")
}

func verifyFor(c *x509.Certificate, pool *x509.CertPool, name string, usage x509.ExtKeyUsage) error {
	_, err := c.Verify(x509.VerifyOptions{DNSName: name, Roots: pool, KeyUsages: []x509.ExtKeyUsage{usage}})
	return err
}

func TestGenSecretsMakesWhatTheManifestsMount(t *testing.T) {
	m := mustLoad(t)
	out := filepath.Join(t.TempDir(), "secrets")
	genSecrets(t, false, "-n", namespace, "-o", out)

	// Every file the kustomization reads is written, keys and the token
	// for their owner alone.
	for name, s := range m.secrets {
		for key, path := range s.files {
			fi, err := os.Stat(generatedFile(out, path))
			if err != nil {
				t.Errorf("secret %s key %s: %v", name, key, err)
				continue
			}
			if fi.Mode().Perm()&0o077 != 0 {
				t.Errorf("%s has mode %v, want the owner's alone", path, fi.Mode().Perm())
			}
		}
	}
	token, err := os.ReadFile(filepath.Join(out, "dexd-token", "token"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^[0-9a-f]{64}\n$`).Match(token) {
		t.Errorf("the token %q is not 32 random bytes in hex", token)
	}

	node, pool := leaf(t, filepath.Join(out, "dexd-tls"))
	for _, name := range nodeNames(namespace, 3) {
		if err := verifyFor(node, pool, name, x509.ExtKeyUsageServerAuth); err != nil {
			t.Errorf("the node certificate does not serve %s: %v", name, err)
		}
	}
	// A node dials its peers with the same certificate: raft asks for it.
	if err := verifyFor(node, pool, "", x509.ExtKeyUsageClientAuth); err != nil {
		t.Errorf("the node certificate cannot dial: %v", err)
	}
	for _, name := range []string{"dexd-3.dexd-peers", "dexd-0.dexd-peers.other", "dexd.other.svc.cluster.local", "dexd-peers"} {
		if verifyFor(node, pool, name, x509.ExtKeyUsageServerAuth) == nil {
			t.Errorf("the node certificate is valid for %s, a name outside the cluster", name)
		}
	}
	worker, wpool := leaf(t, filepath.Join(out, "dexworker-tls"))
	if err := verifyFor(worker, wpool, "", x509.ExtKeyUsageClientAuth); err != nil {
		t.Errorf("the Worker's certificate is no client certificate: %v", err)
	}
	if verifyFor(worker, wpool, "localhost", x509.ExtKeyUsageServerAuth) == nil {
		t.Error("the Worker's certificate serves: it could speak raft")
	}
	if err := verifyFor(node, wpool, nodesName, x509.ExtKeyUsageServerAuth); err != nil {
		t.Errorf("the Worker's CA does not trust the nodes: %v", err)
	}

	// Run again: new certificates of the same CA, the same token.
	genSecrets(t, false, "-n", namespace, "-o", out)
	renewed, _ := leaf(t, filepath.Join(out, "dexd-tls"))
	if renewed.SerialNumber.Cmp(node.SerialNumber) == 0 {
		t.Error("a second run kept the node certificate")
	}
	if err := verifyFor(renewed, pool, nodesName, x509.ExtKeyUsageServerAuth); err != nil {
		t.Errorf("the renewed certificate is not of the first CA: %v", err)
	}
	if again, _ := os.ReadFile(filepath.Join(out, "dexd-token", "token")); !bytes.Equal(again, token) {
		t.Error("a second run replaced the token, which the cluster already recorded")
	}

	// A new CA in two steps: the bundle first, certificates unchanged.
	old := filepath.Join(t.TempDir(), "old-ca")
	if err := os.Rename(filepath.Join(out, "ca"), old); err != nil {
		t.Fatal(err)
	}
	genSecrets(t, false, "-n", namespace, "-o", out, "--ca-only", "--also-trust", filepath.Join(old, "dex-ca.pem"))
	if cas := readPEMCerts(t, filepath.Join(out, "dexworker-tls", "ca.crt")); len(cas) != 2 {
		t.Errorf("--also-trust: ca.crt holds %d certificates, want the new CA and the old", len(cas))
	}
	kept, bundle := leaf(t, filepath.Join(out, "dexd-tls"))
	if kept.SerialNumber.Cmp(renewed.SerialNumber) != 0 {
		t.Error("--ca-only replaced the node certificate")
	}
	if err := verifyFor(kept, bundle, nodesName, x509.ExtKeyUsageServerAuth); err != nil {
		t.Errorf("the bundle does not trust the old CA's certificate: %v", err)
	}

	// Five pods, another namespace, the host of an Ingress.
	five := filepath.Join(t.TempDir(), "secrets")
	genSecrets(t, false, "-n", "prod", "-r", "5", "-o", five, "--dns", "dex.example.com", "--dns", "a.example.com,b.example.com")
	node5, pool5 := leaf(t, filepath.Join(five, "dexd-tls"))
	for _, name := range append(nodeNames("prod", 5), "dex.example.com", "a.example.com", "b.example.com") {
		if err := verifyFor(node5, pool5, name, x509.ExtKeyUsageServerAuth); err != nil {
			t.Errorf("-r 5 -n prod: not valid for %s: %v", name, err)
		}
	}

	for _, args := range [][]string{
		{"-n", "Dex"}, {"-n", "dex.prod"}, {"-r", "0"}, {"-r", "three"}, {"-d", "cluster..local"},
		{"--also-trust", filepath.Join(out, "dexd-token", "token")}, {"--bogus"}, {"-n"}, {"--ca-only"},
	} {
		genSecrets(t, true, append(args, "-o", filepath.Join(t.TempDir(), "s"))...)
	}
	cmd := exec.Command("./gen-secrets.sh", "-o", filepath.Join(t.TempDir(), "s"))
	cmd.Env = append(os.Environ(), "DEXCTL=no-such-dexctl")
	if msg, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(msg), "no no-such-dexctl") {
		t.Errorf("without dexctl: %v %s", err, msg)
	}
}

// kubectl's own kustomize builds the directory with the script's files:
// each generated Secret holds the files, and the pods mount it by its
// hashed name.
func TestKustomizeBuildsWithTheSecrets(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not on PATH; the kustomization is not built")
	}
	dir := t.TempDir()
	for _, f := range append(mustLoad(t).files, "kustomization.yaml") {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command(kubectl, "kustomize", dir).CombinedOutput(); err == nil {
		t.Errorf("kustomize built without the Secrets' files:\n%s", out)
	}
	genSecrets(t, false, "-n", namespace, "-o", filepath.Join(dir, secretsDir))
	out, err := exec.Command(kubectl, "kustomize", dir).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize: %v", err)
	}
	m := mustLoad(t)
	rendered := &manifests{statefulSets: map[string]*appsv1.StatefulSet{}, deployments: map[string]*appsv1.Deployment{},
		services: map[string]*corev1.Service{}, pdbs: map[string]*policyv1.PodDisruptionBudget{}}
	hashed := map[string]string{} // a generator's name → the Secret's
	for _, doc := range docSep.Split(string(out), -1) {
		var s corev1.Secret
		if err := yaml.Unmarshal([]byte(doc), &s); err != nil {
			t.Fatal(err)
		}
		if s.Kind != "Secret" {
			if err := rendered.decodeObject("kustomize output", []byte(doc)); err != nil {
				t.Fatal(err)
			}
			continue
		}
		base := s.Name[:max(strings.LastIndex(s.Name, "-"), 0)]
		gen, ok := m.secrets[base]
		if !ok {
			t.Errorf("kustomize made a Secret %s the kustomization does not name", s.Name)
			continue
		}
		hashed[base] = s.Name
		if s.Type != gen.typ {
			t.Errorf("%s: type %s, want %s", s.Name, s.Type, gen.typ)
		}
		for key, path := range gen.files {
			want, err := os.ReadFile(generatedFile(filepath.Join(dir, secretsDir), path))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(s.Data[key], want) {
				t.Errorf("%s: key %s does not hold %s", s.Name, key, path)
			}
		}
	}
	for name := range m.secrets {
		if hashed[name] == "" {
			t.Errorf("kustomize made no Secret %s", name)
		}
	}
	// Every reference in the pods is to a made Secret's hashed name, or to
	// one made by hand.
	for _, w := range workloads(t, rendered) {
		var refs []string
		for _, v := range w.spec.Volumes {
			if v.Secret != nil {
				refs = append(refs, v.Secret.SecretName)
			}
		}
		for _, e := range w.c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				refs = append(refs, e.ValueFrom.SecretKeyRef.Name)
			}
		}
		if len(refs) == 0 {
			t.Errorf("%s refers to no Secret", w.name)
		}
		for _, r := range refs {
			known := externalSecrets[r] != nil
			for _, h := range hashed {
				known = known || r == h
			}
			if !known {
				t.Errorf("%s refers to the Secret %s, which kustomize did not make", w.name, r)
			}
		}
	}
}

// proc is a started process; stopped by its PID when the test ends.
type proc struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func start(t *testing.T, name string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(name, args...), log: filepath.Join(t.TempDir(), filepath.Base(name)+".log"), done: make(chan struct{})}
	f, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	// Only the pod's environment: nothing of the test's (no $DEX_TOKEN).
	p.cmd.Env, p.cmd.Stdout, p.cmd.Stderr = append([]string{}, env...), f, f
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); f.Close(); close(p.done) }()
	t.Cleanup(func() {
		syscall.Kill(p.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			syscall.Kill(p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
		if t.Failed() {
			out, _ := os.ReadFile(p.log)
			t.Logf("%s:\n%s", name, out)
		}
	})
	return p
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// pod emulates the kubelet for one container: each Secret volume becomes a
// directory of its keys, each $(VAR) and env value is resolved, and the
// flags that name a mounted file point into those directories.
type pod struct {
	flags  map[string]string
	env    []string
	mounts map[string]string // mountPath → local directory
}

func newPod(t *testing.T, m *manifests, w workload, out string, vars map[string]string, external map[string]map[string]string) *pod {
	t.Helper()
	secret := func(name, key string) []byte {
		if s, ok := m.secrets[name]; ok {
			data, err := os.ReadFile(generatedFile(out, s.files[key]))
			if err != nil {
				t.Fatal(err)
			}
			return data
		}
		if v, ok := external[name][key]; ok {
			return []byte(v)
		}
		t.Fatalf("%s: no Secret %s with key %s", w.name, name, key)
		return nil
	}
	p := &pod{flags: podFlags(t, w.c, vars), mounts: map[string]string{}}
	for _, vm := range w.c.VolumeMounts {
		for _, v := range w.spec.Volumes {
			if v.Name != vm.Name || v.Secret == nil {
				continue
			}
			dir := filepath.Join(t.TempDir(), v.Name)
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			// The Secret's keys as files, or only the items it maps.
			keys := map[string]string{}
			if s, ok := m.secrets[v.Secret.SecretName]; ok {
				for k := range s.files {
					keys[k] = k
				}
			}
			for k := range external[v.Secret.SecretName] {
				keys[k] = k
			}
			if len(v.Secret.Items) > 0 {
				keys = map[string]string{}
				for _, it := range v.Secret.Items {
					keys[it.Key] = it.Path
				}
			}
			for k, file := range keys {
				if err := os.WriteFile(filepath.Join(dir, file), secret(v.Secret.SecretName, k), 0o400); err != nil {
					t.Fatal(err)
				}
			}
			p.mounts[vm.MountPath] = dir
		}
	}
	for f, v := range p.flags {
		if dir, ok := p.mounts[filepath.Dir(v)]; ok {
			p.flags[f] = filepath.Join(dir, filepath.Base(v))
		}
	}
	for _, e := range w.c.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			p.env = append(p.env, e.Name+"="+string(secret(e.ValueFrom.SecretKeyRef.Name, e.ValueFrom.SecretKeyRef.Key)))
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil:
			p.env = append(p.env, e.Name+"="+vars[map[string]string{"metadata.name": "POD_NAME", "metadata.namespace": "POD_NAMESPACE"}[e.ValueFrom.FieldRef.FieldPath]])
		default:
			p.env = append(p.env, e.Name+"="+e.Value)
		}
	}
	return p
}

func (p *pod) args() []string {
	var a []string
	for f, v := range p.flags {
		a = append(a, "--"+f+"="+v)
	}
	return a
}

// The StatefulSet's dexd and the Deployment's Worker, run with the files
// the script made, mounted and passed as the manifests say (one node, on
// loopback): TLS and tokens are on, and both work.
func TestManifestsRunWithTheSecrets(t *testing.T) {
	bin := binaries.Build(t)
	m := mustLoad(t)
	out := filepath.Join(t.TempDir(), "secrets")
	genSecrets(t, false, "-n", namespace, "-o", out)
	ws := workloads(t, m)

	// dexd-0 alone, its addresses on loopback.
	node := newPod(t, m, ws[0], out, map[string]string{"POD_NAME": "dexd-0", "POD_NAMESPACE": namespace}, nil)
	raft, grpcAddr, httpAddr := freePort(t), freePort(t), freePort(t)
	node.flags["raft-addr"], node.flags["grpc-addr"], node.flags["http-addr"] = raft, grpcAddr, httpAddr
	node.flags["peers"] = "dexd-0=" + raft
	node.flags["data-dir"] = filepath.Join(t.TempDir(), "data")
	d := start(t, filepath.Join(bin, "dexd"), node.env, node.args()...)

	// /readyz over HTTPS with the nodes' CA, as the probes reach it.
	_, pool := leaf(t, filepath.Join(out, "dexd-tls"))
	https := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := https.Get("https://" + httpAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case <-d.done:
			t.Fatalf("dexd exited: %v", d.cmd.ProcessState)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz not 200 over HTTPS within 30s: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if resp, err := http.Get("http://" + httpAddr + "/readyz"); err == nil && resp.StatusCode == http.StatusOK {
		t.Error("the HTTP port answers plain HTTP")
	}

	// The console acts only with a token.
	resp, err := https.Post("https://"+httpAddr+"/ui/sessions/s1/approve", "application/x-www-form-urlencoded", strings.NewReader("step=x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the console's approve without a token: %d, want 401", resp.StatusCode)
	}

	// dexctl as `kubectl exec dexd-0 -- dexctl` runs it: the pod's files
	// and its $DEX_TOKEN.
	tlsArgs := []string{"--addr=" + grpcAddr, "--tls-cert=" + node.flags["tls-cert"], "--tls-key=" + node.flags["tls-key"], "--tls-ca=" + node.flags["tls-ca"]}
	dexctl := func(env []string, args ...string) (string, error) {
		cmd := exec.Command(filepath.Join(bin, "dexctl"), args...)
		cmd.Env = append([]string{}, env...)
		b, err := cmd.CombinedOutput()
		return string(b), err
	}
	if got, err := dexctl(node.env, append(tlsArgs, "status")...); err != nil || !strings.Contains(got, "leader: dexd-0") {
		t.Fatalf("dexctl status with the pod's files and token: %v\n%s", err, got)
	}
	if got, err := dexctl(nil, append(tlsArgs, "status")...); err == nil || !strings.Contains(got, "requires a token") {
		t.Errorf("dexctl status without a token: %v\n%s", err, got)
	}
	if got, err := dexctl(node.env, "--addr="+grpcAddr, "--tls-ca="+node.flags["tls-ca"], "--timeout=1s", "status"); err == nil {
		t.Errorf("dexctl status without a client certificate succeeded:\n%s", got)
	}

	// The Workers' token, made as docs/tls-and-tokens.md shows, then the
	// Deployment's Worker with it.
	created, err := dexctl(node.env, append(tlsArgs, "token", "create", "--role", "worker", "--name", "dexworker", "--json")...)
	if err != nil {
		t.Fatalf("token create: %v\n%s", err, created)
	}
	var tok struct{ Secret string }
	if err := json.Unmarshal([]byte(created), &tok); err != nil || tok.Secret == "" {
		t.Fatalf("token create --json: %v %q", err, created)
	}
	worker := newPod(t, m, ws[1], out, map[string]string{"POD_NAME": "dexworker-abc"},
		map[string]map[string]string{"dexworker-token": {"token": tok.Secret}})
	worker.flags["addr"] = "dex:///" + grpcAddr
	worker.flags["ledger"] = filepath.Join(t.TempDir(), "ledger.jsonl")
	wp := start(t, filepath.Join(bin, "dexworker"), worker.env, worker.args()...)
	deadline = time.Now().Add(20 * time.Second)
	for {
		got, err := dexctl(node.env, append(tlsArgs, "workers")...)
		if err == nil && strings.Contains(got, "dexworker-abc") {
			break
		}
		select {
		case <-wp.done:
			t.Fatalf("dexworker exited: %v", wp.cmd.ProcessState)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Worker did not register within 20s: %v\n%s", err, got)
		}
		time.Sleep(300 * time.Millisecond)
	}
}
