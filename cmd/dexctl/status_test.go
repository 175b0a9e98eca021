package main

import (
	"bytes"
	"strings"
	"testing"
)

// With no leader, status still shows the nodes, says why on stderr and
// exits 1, so a script can tell.
func TestStatusWithoutALeaderExitsOne(t *testing.T) {
	for _, c := range []struct {
		name   string
		a      *fakeAdmin
		code   int
		stderr string
	}{
		{"a leader", &fakeAdmin{status: threeNodes("n1", "leader", "follower", "follower")}, 0, ""},
		{"lost quorum", &fakeAdmin{status: threeNodes("", "candidate", "unreachable", "unreachable")}, 1,
			"dexctl: no leader: 1 of 3 voters reachable: no quorum (n2, n3 not answering); the cluster serves again once 2 answer\n"},
		{"an election", &fakeAdmin{status: threeNodes("", "candidate", "follower", "unreachable")}, 1,
			"dexctl: no leader yet (node n1 knows none); an election is under way\n"},
	} {
		addr := startFakeNode(t, &fakeSessions{}, c.a, true)
		for _, json := range []bool{false, true} {
			args := []string{"--addr", addr, "status"}
			if json {
				args = append(args, "--json")
			}
			var out, errb bytes.Buffer
			code := execute(args, &out, &errb)
			if code != c.code || errb.String() != c.stderr {
				t.Errorf("%s: dexctl %s: exit %d, stderr %q; want exit %d, stderr %q", c.name, strings.Join(args[2:], " "), code, errb.String(), c.code, c.stderr)
			}
			if !strings.Contains(out.String(), "n3") {
				t.Errorf("%s: dexctl %s shows no nodes:\n%s", c.name, strings.Join(args[2:], " "), out.String())
			}
		}
	}
}
