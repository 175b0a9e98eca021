package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMatrix_WorkerLanguage(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"matrix", "--out", t.TempDir(), "--worker", "cobol"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), `unknown Worker language "cobol"`) {
		t.Fatalf("unknown language: exit %d, %q", code, errb.String())
	}
	// A bin directory with dexd and dexworker but no Python launcher.
	bin := t.TempDir()
	for _, b := range []string{"dexd", "dexworker", "chaos/dexd"} {
		p := filepath.Join(bin, b)
		_ = os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	errb.Reset()
	if code := run([]string{"matrix", "--out", t.TempDir(), "--bin", bin, "--worker", "python"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "dexworker-python is missing") {
		t.Fatalf("missing launcher: exit %d, %q", code, errb.String())
	}
}
