//go:build !chaos

package peer

// raftDialAddr is addr outside the chaos build (see chaos_routes.go).
func raftDialAddr(addr string) string { return addr }
