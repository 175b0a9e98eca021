package cluster

import (
	"strings"
	"testing"
)

func TestStateDigestOfADirWithoutAStoreSaysSo(t *testing.T) {
	dir := t.TempDir()
	if _, err := StateDigest(dir, 1); err == nil || !strings.Contains(err.Error(), "has no raft store") {
		t.Fatalf("StateDigest(%s) = %v, want: has no raft store", dir, err)
	}
}
