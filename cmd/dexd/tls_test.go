package main

import (
	"io"
	"strings"
	"testing"
)

func TestTLSFlagsComeTogether(t *testing.T) {
	base := []string{"--id", "n1", "--data-dir", t.TempDir(), "--raft-addr", "127.0.0.1:1", "--grpc-addr", "127.0.0.1:2", "--http-addr", "127.0.0.1:3", "--peers", "n1=127.0.0.1:1"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--tls-cert", "n1.pem"}, "missing --tls-key, --tls-ca"},
		{[]string{"--tls-cert", "n1.pem", "--tls-key", "k.pem"}, "missing --tls-ca"},
		{[]string{"--http-tls"}, "--http-tls needs --tls-cert"},
	} {
		_, err := parse(append(append([]string{}, base...), c.args...), io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want an error with %q", c.args, err, c.want)
		}
	}
	o, err := parse(append(base, "--tls-cert", "c", "--tls-key", "k", "--tls-ca", "a", "--http-tls"), io.Discard)
	if err != nil || !o.tls.files.Enabled() || !o.tls.httpTLS {
		t.Fatalf("all TLS flags: %v", err)
	}
}
