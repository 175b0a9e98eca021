package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dexhq/dex/api/server"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
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
		tls := []string{"--tls-cert", "c.pem", "--tls-key", "k.pem", "--tls-ca", "ca.pem"}
		if _, err := parse(secArgs(a[0], a[1], a[2], tls...), io.Discard); err == nil {
			t.Fatalf("%v with TLS and no --acl was accepted", a)
		}
		if _, err := parse(secArgs(a[0], a[1], a[2], append(tls, "--acl")...), io.Discard); err != nil {
			t.Fatalf("%v with TLS and --acl: %v", a, err)
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

func TestSecurity_MetricsTakeAnAdminTokenWhenNotPublic(t *testing.T) {
	f := fsm.New(fsm.Options{})
	for i, tk := range []*fsmpb.AclToken{
		{Id: "a", Name: "a", Role: fsmpb.TokenRole_TOKEN_ROLE_ADMIN, SecretSha256: server.HashSecret("admin-secret")},
		{Id: "c", Name: "c", Role: fsmpb.TokenRole_TOKEN_ROLE_CLIENT, SecretSha256: server.HashSecret("client-secret")},
	} {
		data, _ := fsm.Encode(&fsmpb.Command{Body: &fsmpb.Command_CreateToken{CreateToken: &fsmpb.CreateToken{Token: tk}}})
		if res := f.ApplyEntry(uint64(i+1), data); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	get := func(h http.Handler, path, secret string) int {
		req := httptest.NewRequest("GET", path, nil)
		if secret != "" {
			req.Header.Set("Authorization", "Bearer "+secret)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	closed := (&security{acl: true}).guardMetrics(f.State, inner)
	for _, c := range []struct {
		path, secret string
		want         int
	}{
		{"/metrics", "", http.StatusUnauthorized},
		{"/metrics", "client-secret", http.StatusUnauthorized},
		{"/metrics", "nope", http.StatusUnauthorized},
		{"/metrics", "admin-secret", http.StatusOK},
		{"/healthz", "", http.StatusOK},
		{"/readyz", "", http.StatusOK},
	} {
		if got := get(closed, c.path, c.secret); got != c.want {
			t.Fatalf("%s with %q: %d; want %d", c.path, c.secret, got, c.want)
		}
	}
	for _, sec := range []*security{{acl: true, metricsPublic: true}, {acl: false}} {
		if got := get(sec.guardMetrics(f.State, inner), "/metrics", ""); got != http.StatusOK {
			t.Fatalf("%+v: /metrics without a token: %d; want 200", sec, got)
		}
	}
}
