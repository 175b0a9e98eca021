package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func secArgs(grpc, raft, http string, extra ...string) []string {
	return append([]string{"--id", "n1", "--data-dir", "d", "--grpc-addr", grpc, "--raft-addr", raft, "--http-addr", http, "--peers", "n1=" + raft}, extra...)
}

func TestSecurity_ANonLoopbackAddressNeedsTLSAndTokensOrInsecure(t *testing.T) {
	t.Setenv("DEX_TOKEN", "")
	if _, err := parse(secArgs("127.0.0.1:1", "127.0.0.1:2", "localhost:3"), io.Discard); err != nil {
		t.Fatalf("loopback: %v", err)
	}
	for _, a := range [][3]string{
		{"0.0.0.0:1", "127.0.0.1:2", "127.0.0.1:3"},
		{"127.0.0.1:1", "10.0.0.5:2", "127.0.0.1:3"},
		{"127.0.0.1:1", "127.0.0.1:2", "dex.example:3"},
	} {
		_, err := parse(secArgs(a[0], a[1], a[2]), io.Discard)
		if err == nil || !strings.Contains(err.Error(), "is not a loopback address: refusing to serve it without TLS and tokens") || strings.Contains(err.Error(), "\n") {
			t.Fatalf("%v: %v; want one line refusing", a, err)
		}
		// Tokens alone are not enough without TLS.
		if _, err := parse(secArgs(a[0], a[1], a[2], "--acl"), io.Discard); err == nil {
			t.Fatalf("%v with --acl and no TLS was accepted", a)
		}
		if _, err := parse(secArgs(a[0], a[1], a[2], "--insecure"), io.Discard); err != nil {
			t.Fatalf("%v with --insecure: %v", a, err)
		}
	}
}

func TestSecurity_BootstrapFileTurnsACLsOnAndIsTheNodesToken(t *testing.T) {
	t.Setenv("DEX_TOKEN", "")
	dir := t.TempDir()
	good := filepath.Join(dir, "boot")
	os.WriteFile(good, []byte("  a-secret-of-32-characters-long!\n"), 0o600)
	o, err := parse(secArgs("127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3", "--acl-bootstrap-token-file", good), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !o.sec.acl || o.sec.bootstrapSecret != "a-secret-of-32-characters-long!" || o.sec.token != o.sec.bootstrapSecret {
		t.Fatalf("security %+v", o.sec)
	}
	if !o.sec.metricsPublic {
		t.Fatal("/metrics on loopback is not public by default")
	}

	short := filepath.Join(dir, "short")
	os.WriteFile(short, []byte("abc"), 0o600)
	if _, err := parse(secArgs("127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3", "--acl-bootstrap-token-file", short), io.Discard); err == nil || !strings.Contains(err.Error(), "at least 16") {
		t.Fatalf("short secret: %v", err)
	}
	if _, err := parse(secArgs("127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3", "--acl-bootstrap-token-file", filepath.Join(dir, "none")), io.Discard); err == nil {
		t.Fatal("a missing bootstrap file was accepted")
	}

	t.Setenv("DEX_TOKEN", "from-env")
	o, err = parse(secArgs("127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3", "--acl"), io.Discard)
	if err != nil || o.sec.token != "from-env" {
		t.Fatalf("token from $DEX_TOKEN: %v %q", err, o.sec.token)
	}
	o, err = parse(secArgs("127.0.0.1:1", "127.0.0.1:2", "10.1.1.1:3", "--acl", "--insecure"), io.Discard)
	if err != nil || o.sec.metricsPublic {
		t.Fatalf("--acl on a non-loopback http address: %v, metrics public %v; want it behind a token", err, o.sec.metricsPublic)
	}
}
