//go:build !chaos

package gc

// afterArchiveWrite does nothing outside the chaos build.
func afterArchiveWrite() {}
