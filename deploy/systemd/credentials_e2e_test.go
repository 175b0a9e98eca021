//go:build e2e

package systemd

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dexhq/dex/deploy/internal/binaries"
)

// root is the repository.
var root = binaries.Root

func TestMain(m *testing.M) { binaries.Main(m) }

// systemd's own parser takes the units: specifiers (%d, %i), LoadCredential
// and the quoting of the Worker's shell.
func TestSystemdAnalyzeVerifiesTheUnits(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not on PATH; the units are not verified by systemd")
	}
	bin := binaries.Build(t)
	dir := t.TempDir()
	for file, as := range map[string]string{"dexd@.service": "dexd@n1.service", "dexworker.service": "dexworker.service"} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		// systemd-analyze checks that the binary exists.
		unit := strings.ReplaceAll(string(data), "/usr/local/bin/", bin+"/")
		if err := os.WriteFile(filepath.Join(dir, as), []byte(unit), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(analyze, "verify", "--man=no", filepath.Join(dir, as))
		if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
			t.Errorf("systemd-analyze verify %s: %v\n%s", file, err, out)
		}
	}
}

// proc is a started process; stopped by its PID when the test ends.
type proc struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func start(t *testing.T, env []string, name string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(name, args...), log: filepath.Join(t.TempDir(), "out.log"), done: make(chan struct{})}
	f, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	// The unit's environment alone: nothing of the test's (no $DEX_TOKEN).
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
			t.Logf("%s %v:\n%s", name, args, out)
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

// host is a stand-in for a machine's /etc/dex.
type host struct{ etc string }

func (h host) path(p string) string { return filepath.Join(h.etc, strings.TrimPrefix(p, "/etc/dex/")) }

// credentialsDir does what systemd does at the unit's start: it copies each
// LoadCredential's file into a directory of the unit's own (%d).
func (h host) credentialsDir(t *testing.T, u unit, instance string) string {
	t.Helper()
	creds, err := credentials(u)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for id, src := range creds {
		data, err := os.ReadFile(h.path(strings.ReplaceAll(src, "%i", instance)))
		if err != nil {
			t.Fatalf("LoadCredential %s: %v (systemd would not start the unit)", id, err)
		}
		if err := os.WriteFile(filepath.Join(dir, id), data, 0o400); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// argv is the unit's command as systemd runs it: %d is the credentials
// directory, the binary the one built here.
func argv(c command, bin, creds string) []string {
	var a []string
	if c.shell != "" {
		a = append(a, "/bin/sh", "-c", strings.ReplaceAll(c.shell, "%d", creds))
	}
	a = append(a, filepath.Join(bin, filepath.Base(c.bin)))
	for f, v := range c.flags {
		a = append(a, "--"+f+"="+strings.ReplaceAll(v, "%d", creds))
	}
	return a
}

// The units run as shipped, with the files docs/tls-and-tokens.md makes
// (one node, on loopback): TLS and tokens are on, dexctl works with them,
// and the Worker's shell hands it its token.
func TestUnitsRunWithTheirCredentials(t *testing.T) {
	bin := binaries.Build(t)
	dexctl := filepath.Join(bin, "dexctl")
	run := func(env []string, args ...string) (string, error) {
		cmd := exec.Command(dexctl, args...)
		cmd.Env = append([]string{}, env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	// The files, as the doc makes and installs them.
	h := host{etc: t.TempDir()}
	pki := filepath.Join(t.TempDir(), "pki")
	for _, args := range [][]string{
		{"tls", "ca", "create", "--dir", pki},
		{"tls", "cert", "create", "--ca-dir", pki, "--server", "n1", "--ip", "127.0.0.1"},
		{"tls", "cert", "create", "--ca-dir", pki, "--client", "dexworker"},
		{"tls", "cert", "create", "--ca-dir", pki, "--client", "ops"},
	} {
		if out, err := run(nil, args...); err != nil {
			t.Fatalf("dexctl %v: %v\n%s", args, err, out)
		}
	}
	if err := os.Mkdir(h.path("/etc/dex/tls"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"dex-ca.pem", "n1-server.pem", "n1-server-key.pem", "dexworker-client.pem", "dexworker-client-key.pem"} {
		data, err := os.ReadFile(filepath.Join(pki, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(h.path("/etc/dex/tls/"+f), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	token := "0123456789abcdef0123456789abcdef"
	if err := os.WriteFile(h.path("/etc/dex/bootstrap-token"), []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	// dexd@n1 with the example env file, its addresses on loopback.
	u := parseUnit(t, "dexd@.service")
	env := parseEnv(t, "dexd.env.example")
	raft, grpcAddr, httpAddr := freePort(t), freePort(t), freePort(t)
	env["DEX_RAFT_ADDR"], env["DEX_GRPC_ADDR"], env["DEX_HTTP_ADDR"], env["DEX_PEERS"] = raft, grpcAddr, httpAddr, "n1="+raft
	c := execStart(t, u, "n1", env)
	c.flags["data-dir"] = filepath.Join(t.TempDir(), "n1") // the StateDirectory
	creds := h.credentialsDir(t, u, "n1")
	a := argv(c, bin, creds)
	d := start(t, []string{"CREDENTIALS_DIRECTORY=" + creds}, a[0], a[1:]...)

	ca, err := os.ReadFile(filepath.Join(pki, "dex-ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
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

	// An operator's dexctl: a client certificate and the admin token.
	ops := []string{"--addr=" + grpcAddr, "--tls-cert=" + filepath.Join(pki, "ops-client.pem"),
		"--tls-key=" + filepath.Join(pki, "ops-client-key.pem"), "--tls-ca=" + filepath.Join(pki, "dex-ca.pem")}
	admin := []string{"DEX_TOKEN=" + token}
	if out, err := run(admin, append(ops, "status")...); err != nil || !strings.Contains(out, "leader: n1") {
		t.Fatalf("dexctl status: %v\n%s", err, out)
	}
	if out, err := run(nil, append(ops, "status")...); err == nil || !strings.Contains(out, "requires a token") {
		t.Errorf("dexctl status without a token: %v\n%s", err, out)
	}

	// The Worker's token, installed as /etc/dex/dexworker-token.
	out, err := run(admin, append(ops, "token", "create", "--role", "worker", "--name", "dexworker", "--json")...)
	if err != nil {
		t.Fatalf("token create: %v\n%s", err, out)
	}
	var tok struct{ Secret string }
	if err := json.Unmarshal([]byte(out), &tok); err != nil || tok.Secret == "" {
		t.Fatalf("token create --json: %v %q", err, out)
	}
	if err := os.WriteFile(h.path("/etc/dex/dexworker-token"), []byte(tok.Secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	wu := parseUnit(t, "dexworker.service")
	wenv := parseEnv(t, "dexworker.env.example")
	wenv["DEX_ADDR"] = "dex:///" + grpcAddr
	wc := execStart(t, wu, "", wenv)
	wc.flags["ledger"] = filepath.Join(t.TempDir(), "ledger.jsonl")
	wc.flags["id"] = "w1"
	wcreds := h.credentialsDir(t, wu, "")
	wa := argv(wc, bin, wcreds)
	w := start(t, []string{"CREDENTIALS_DIRECTORY=" + wcreds, "PATH=/usr/bin:/bin"}, wa[0], wa[1:]...)
	deadline = time.Now().Add(20 * time.Second)
	for {
		out, err := run(admin, append(ops, "workers")...)
		if err == nil && strings.Contains(out, "w1") {
			break
		}
		select {
		case <-w.done:
			t.Fatalf("dexworker exited: %v", w.cmd.ProcessState)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Worker did not register within 20s: %v\n%s", err, out)
		}
		time.Sleep(300 * time.Millisecond)
	}
}
