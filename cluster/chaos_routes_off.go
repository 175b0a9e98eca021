//go:build !chaos

package cluster

// raftDialAddr is addr outside the chaos build (see chaos_routes.go).
func raftDialAddr(addr string) string { return addr }
