//go:build e2e

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dexhq/dex/chaos/harness"
)

// certifyBin holds dexd for the certify runs: $DEX_BIN's (make e2e builds
// it), else built once.
var certifyBin = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "dexchaos-certify-bin-")
	if err != nil {
		return "", err
	}
	if err := harness.Binaries(dir, "dexd"); err != nil {
		return "", err
	}
	return dir, nil
})

type buildError struct{ out string }

func (e *buildError) Error() string { return "go build: " + e.out }

func certify(t *testing.T, dir string, args ...string) (int, string, string) {
	t.Helper()
	bin, err := certifyBin()
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	wd, _ := os.Getwd()
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = os.Chdir(wd) }()
	var stdout, stderr bytes.Buffer
	args = append([]string{"certify", "--bin", bin, "--out", out, "--junit", filepath.Join(out, "junit.xml")}, args...)
	code := run(args, &stdout, &stderr)
	t.Logf("dexchaos %s\n%s%s", strings.Join(args, " "), stdout.String(), stderr.String())
	return code, stdout.String() + stderr.String(), out
}

// goExample builds the Go example Worker from its own module, as a user
// builds it, once.
var goExample = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "dexchaos-certify-example-")
	if err != nil {
		return "", err
	}
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "certify-worker"), ".")
	build.Dir = "../../docs/examples/go"
	if out, err := build.CombinedOutput(); err != nil {
		return "", &buildError{string(out)}
	}
	return filepath.Join(dir, "certify-worker"), nil
})

// The Go example Worker certifies in the Worker-kill column: its write
// repeats with its key, its single-attempt tool never repeats.
func TestCertify_GoExamplePasses(t *testing.T) {
	ex, _ := filepath.Abs("../../docs/examples/go")
	worker, err := goExample()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("INVOICE_STORE", filepath.Join(t.TempDir(), "invoices.json"))
	code, stdout, out := certify(t, ex, "--tools", "tools.json", "--columns", "worker-kill", "--row", "send_invoice|charge_card", "--", worker)
	if code != 0 || !strings.Contains(stdout, "certify: 4 passed, 0 failed, 0 skipped") {
		t.Fatalf("exit %d; want 0 with 4 cells passed", code)
	}
	var rep struct {
		Cells []struct{ Step, Column, Result string }
	}
	b, err := os.ReadFile(filepath.Join(out, "matrix.json"))
	if err == nil {
		err = json.Unmarshal(b, &rep)
	}
	if err != nil || len(rep.Cells) != 4 {
		t.Fatalf("matrix.json: %v, %d cells", err, len(rep.Cells))
	}
	if junit, err := os.ReadFile(filepath.Join(out, "junit.xml")); err != nil || !strings.Contains(string(junit), `tests="4" failures="0"`) {
		t.Fatalf("junit.xml: %v\n%s", err, junit)
	}
}

// The broken Python example: certify fails, naming each tool and its fix.
func TestCertify_BrokenExampleNamesTheToolAndTheFix(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import grpc, httpx").Run(); err != nil {
		t.Skip("Debian's python3 with python3-grpcio and python3-httpx is needed for the Python example")
	}
	ex, _ := filepath.Abs("../../docs/examples/broken-python")
	t.Setenv("PYTHONPATH", filepath.Join(ex, "../../../api/python"))
	t.Setenv("INVOICE_STORE", filepath.Join(t.TempDir(), "invoices.json"))
	code, stdout, out := certify(t, ex, "--tools", "tools.json", "--columns", "worker-kill",
		"--row", "while the tool runs", "--", "/usr/bin/python3", "worker.py")
	if code != 1 {
		t.Fatalf("exit %d; want 1", code)
	}
	for _, want := range []string{
		"tool `send_invoice` ran 2 times under policy idempotent_write but used no idempotency key: give the call's idempotency key to the system it writes to",
		"tool `charge_card` is single_attempt in your tools file but registered as read: register it with access single_attempt",
		"reproduce: dexchaos certify --tools tools.json --columns worker-kill --row",
		"certify: 1 passed, 2 failed, 0 skipped",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the output lacks %q", want)
		}
	}
	junit, err := os.ReadFile(filepath.Join(out, "junit.xml"))
	if err != nil || !strings.Contains(string(junit), `failures="2"`) || !strings.Contains(string(junit), "used no idempotency key") {
		t.Fatalf("junit.xml: %v\n%s", err, junit)
	}
}

// On a test cluster the user names (here one node with tokens), certify
// runs the Worker-kill cells with $DEX_TOKEN, and refuses while another
// Worker could take its Steps.
func TestCertify_OnANamedTestCluster(t *testing.T) {
	bin, err := certifyBin()
	if err != nil {
		t.Fatal(err)
	}
	worker, err := goExample()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := harness.NewCluster(harness.ClusterOptions{BinDir: bin, Dir: t.TempDir(), Size: 1, ACL: true, Args: harness.ClusterArgs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.KillAll)
	if err := cl.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cl.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DEX_TOKEN", cl.AdminToken)
	t.Setenv("INVOICE_STORE", filepath.Join(t.TempDir(), "invoices.json"))
	ex, _ := filepath.Abs("../../docs/examples/go")
	var out, errb bytes.Buffer
	if code := run([]string{"certify", "--cluster", cl.Target(), "--columns", "takeover", "--", worker}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "--cluster runs only the worker-kill column") {
		t.Fatalf("takeover on a test cluster: exit %d, %q", code, errb.String())
	}
	code, stdout, _ := certify(t, ex, "--cluster", cl.Target(), "--tools", "tools.json", "--row", "send_invoice", "--", worker)
	if code != 0 || !strings.Contains(stdout, "certify: 2 passed, 0 failed, 0 skipped") {
		t.Fatalf("exit %d; want 0 with 2 cells passed", code)
	}

	other := &harness.Proc{Name: "other", Bin: worker, LogPath: filepath.Join(t.TempDir(), "other.log"),
		Env: []string{"DEX_ADDR=" + cl.Target(), "DEX_WORKER_ID=other", "ANTHROPIC_API_KEY=x"}}
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Kill)
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, stdout, _ = certify(t, ex, "--cluster", cl.Target(), "--tools", "tools.json", "--row", "send_invoice", "--", worker)
		if code == 1 && strings.Contains(stdout, "the test cluster has Workers that could take certify's Steps: other (runs the model)") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("certify ran beside another Worker: exit %d", code)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
