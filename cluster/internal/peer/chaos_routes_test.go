//go:build chaos

package peer

import (
	"strings"
	"testing"
)

func TestRaftRoutes_ParsedAndAppliedToDials(t *testing.T) {
	got := parseRaftRoutes(" 127.0.0.1:7002=127.0.0.1:9102,,127.0.0.1:7003=127.0.0.1:9103 ")
	if len(got) != 2 || got["127.0.0.1:7002"] != "127.0.0.1:9102" || got["127.0.0.1:7003"] != "127.0.0.1:9103" {
		t.Fatalf("routes %v", got)
	}
	if len(parseRaftRoutes("")) != 0 {
		t.Fatal("no routes from an empty variable")
	}
	old := raftRoutes
	defer func() { raftRoutes = old }()
	raftRoutes = got
	if a := raftDialAddr("127.0.0.1:7002"); a != "127.0.0.1:9102" {
		t.Fatalf("a routed peer is dialled at %s", a)
	}
	if a := raftDialAddr("127.0.0.1:7004"); a != "127.0.0.1:7004" {
		t.Fatalf("an unrouted peer is dialled at %s", a)
	}
}

// A malformed route stops the node rather than run without the fault.
func TestRaftRoutes_MalformedRouteIsRefused(t *testing.T) {
	for _, bad := range []string{"127.0.0.1:7002", "=127.0.0.1:9102", "127.0.0.1:7002="} {
		func() {
			defer func() {
				r := recover()
				if r == nil || !strings.Contains(r.(string), raftRoutesEnv) {
					t.Errorf("%q: recovered %v; want a panic naming %s", bad, r, raftRoutesEnv)
				}
			}()
			parseRaftRoutes(bad)
		}()
	}
}
