package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestMatrix_PartitionsFlag(t *testing.T) {
	c, err := parseFlags([]string{"matrix", "--out", "x"}, &bytes.Buffer{})
	if err != nil || c.partitions != 1 {
		t.Fatalf("default: %+v, %v", c, err)
	}
	c, err = parseFlags([]string{"matrix", "--out", "x", "--partitions", "3", "--column", "takeover"}, &bytes.Buffer{})
	if err != nil || c.partitions != 3 {
		t.Fatalf("--partitions 3: %+v, %v", c, err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"matrix", "--out", t.TempDir(), "--partitions", "0"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "--partitions must be at least 1") {
		t.Fatalf("--partitions 0: exit %d, %q", code, errb.String())
	}
}
