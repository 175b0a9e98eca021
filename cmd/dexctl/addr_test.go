package main

import (
	"bytes"
	"strings"
	"testing"
)

// An address without a port would be dialed at 443; dexctl refuses it.
func TestAnAddressWithoutAPortIsAUsageError(t *testing.T) {
	for _, c := range []struct {
		addr, want string
	}{
		{"localhost", "address localhost has no port: give HOST:PORT"},
		{"localhost:", "address localhost: has no port: give HOST:PORT"},
		{"127.0.0.1:7101,10.0.0.2", "address 10.0.0.2 has no port: give HOST:PORT"},
		{"[::1]", "address [::1] has no port: give HOST:PORT"},
		{"::1", "address ::1 is not HOST:PORT"},
	} {
		for _, cmd := range [][]string{{"status"}, {"session", "show", "s1"}, {"session", "watch", "s1"}, {"node", "transfer-leadership"}} {
			var out, errb bytes.Buffer
			code := execute(append([]string{"--addr", c.addr}, cmd...), &out, &errb)
			if code != 2 || !strings.Contains(errb.String(), c.want) {
				t.Errorf("dexctl --addr %s %s: exit %d, stderr %q; want exit 2 with %q", c.addr, strings.Join(cmd, " "), code, errb.String(), c.want)
			}
		}
	}
}
