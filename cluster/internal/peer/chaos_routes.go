//go:build chaos

package peer

import (
	"fmt"
	"os"
	"strings"
)

// The chaos build routes raft dials through the harness's per-link proxies
// (hashicorp/raft knows one address per server, so a fault on one link
// i→j needs node i to dial a proxy of its own for j):
//
//	DEX_CHAOS_RAFT_ROUTES="127.0.0.1:7002=127.0.0.1:9102,127.0.0.1:7003=127.0.0.1:9103"
//
// The handshake and TLS run end to end through the proxy; TLS verifies
// the peer's host, which is the proxy's too on loopback.
const raftRoutesEnv = "DEX_CHAOS_RAFT_ROUTES"

var raftRoutes = parseRaftRoutes(os.Getenv(raftRoutesEnv))

func parseRaftRoutes(s string) map[string]string {
	routes := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		peer, proxy, ok := strings.Cut(kv, "=")
		if !ok || peer == "" || proxy == "" {
			// A harness bug: better to stop than to run without the faults.
			panic(fmt.Sprintf("%s: %q is not PEER_ADDR=PROXY_ADDR", raftRoutesEnv, kv))
		}
		routes[peer] = proxy
	}
	return routes
}

// raftDialAddr is where a raft dial to addr goes.
func raftDialAddr(addr string) string {
	if proxy, ok := raftRoutes[addr]; ok {
		return proxy
	}
	return addr
}
