//go:build e2e

package main

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// A single node bootstrapped from a token file is ready only once that
// token is committed: the first call with it after /readyz says 200 passes.
func TestBootstrapFileToken_ValidOnceReady(t *testing.T) {
	a := freeAddrs(t, 3)
	dir := t.TempDir()
	secret := "a-bootstrap-secret-of-some-length"
	file := filepath.Join(dir, "boot")
	if err := os.WriteFile(file, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startDexd(t, "--id", "n1", "--data-dir", filepath.Join(dir, "data"), "--raft-addr", a[0], "--grpc-addr", a[1],
		"--http-addr", a[2], "--peers", "n1="+a[0], "--acl-bootstrap-token-file", file)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + a[2] + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("never ready; stderr:\n%s", p.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cmd := exec.Command(dexctlBin, "--addr", a[1], "status")
	cmd.Env = append(os.Environ(), "DEX_TOKEN="+secret)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the bootstrap token was refused right after /readyz said ready: %v: %s", err, out)
	}
}
