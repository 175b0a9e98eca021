//go:build !linux

package logstore

// statDisk knows no filesystem outside Linux: a full disk is still named
// from the failed write's error, only without the free space.
func statDisk(string) (diskSpace, bool) { return diskSpace{}, false }
