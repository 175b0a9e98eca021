package main

import (
	"bytes"
	"strings"
	"testing"
)

// A mistyped flag gets one line naming it and where the flags are, not
// the whole flag list.
func TestAnUnknownFlagIsOneLine(t *testing.T) {
	for _, args := range [][]string{{"--bogus"}, {"--id"}, {"--max-payload", "x"}} {
		var stderr bytes.Buffer
		code := run(args, &stderr)
		out := stderr.String()
		if code != 2 || strings.Count(out, "\n") != 1 || !strings.HasPrefix(out, "dexd: ") || !strings.HasSuffix(out, "(run dexd -h for the flags)\n") {
			t.Errorf("dexd %s: exit %d, stderr %q; want exit 2 and one line ending in the -h hint", strings.Join(args, " "), code, out)
		}
	}
	var stderr bytes.Buffer
	if code := run([]string{"--bogus"}, &stderr); !strings.Contains(stderr.String(), "-bogus") {
		t.Errorf("exit %d, stderr %q; want it to name -bogus", code, stderr.String())
	}
}

// -h lists the flags, each help read as written: a backquoted word would
// become the value's name in the usage line.
func TestHelpListsTheFlagsAsWritten(t *testing.T) {
	var stderr bytes.Buffer
	if code := run([]string{"-h"}, &stderr); code != 0 {
		t.Fatalf("dexd -h: exit %d", code)
	}
	out := stderr.String()
	for _, want := range []string{"-chaos-report DIR\n", "-tls-cert string\n", "-grpc-addr string\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("dexd -h lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "-chaos-report dexchaos") || strings.Contains(out, "-tls-cert dexctl") {
		t.Errorf("dexd -h takes a command in a flag's help for its value:\n%s", out)
	}
}
