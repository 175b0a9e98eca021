//go:build !chaos

package logstore

// beforeStoreLogs does nothing outside the chaos build.
func beforeStoreLogs() {}
