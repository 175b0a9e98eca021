package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestVerify_BadFlagsAndADirThatIsNoDataDir(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := runVerify(nil, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "--data-dir is required") {
		t.Fatalf("no --data-dir: exit %d, %q", code, errOut.String())
	}
	errOut.Reset()
	if code := runVerify([]string{"--data-dir", "x", "extra"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), `unexpected argument "extra"`) {
		t.Fatalf("an extra argument: exit %d, %q", code, errOut.String())
	}
	out.Reset()
	dir := t.TempDir()
	if code := runVerify([]string{"--data-dir", dir}, &out, &errOut); code != 1 || !strings.Contains(out.String(), "DAMAGED") || !strings.Contains(out.String(), "is not a Dex data dir") {
		t.Fatalf("an empty dir: exit %d, %q", code, out.String())
	}
}
