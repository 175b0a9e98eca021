//go:build unix

package main

import (
	"os"
	"syscall"
)

// lockFile takes an exclusive lock on path (created if missing) for the
// store's read-change-write, against other Worker processes sharing the
// store. The kernel drops the lock of a killed process.
func lockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
