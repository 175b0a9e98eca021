package logstore

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDiskSpace_NamesTheMountThatHoldsADir(t *testing.T) {
	if got := unescapeMount(`/mnt/my\040disk\134x`); got != `/mnt/my disk\x` {
		t.Fatalf("unescapeMount = %q", got)
	}
	if _, err := os.Stat("/proc/self/mountinfo"); err != nil {
		t.Skip("no /proc/self/mountinfo")
	}
	dir := t.TempDir()
	d, ok := statDisk(dir)
	real, _ := filepath.EvalSymlinks(dir)
	if !ok || d.mount == "" || !under(real, d.mount) || !strings.Contains(d.String(), "filesystem ") {
		t.Fatalf("statDisk(%s) = %+v, %v: want the mount above it", dir, d, ok)
	}
}
