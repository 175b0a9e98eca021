package main

import (
	"bytes"
	"strings"
	"testing"
)

// dexctl exits 2 on a bad flag, argument or command, as dexd and
// dexworker do, and 1 when the command itself fails.
func TestExitCodes(t *testing.T) {
	dead := deadAddr(t)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--bogus", "status"}, 2, "unknown flag: --bogus"},
		{[]string{"status", "extra"}, 2, `unknown command "extra"`},
		{[]string{"session", "show"}, 2, "accepts 1 arg(s), received 0"},
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{[]string{"session", "list", "--limit", "x"}, 2, "invalid argument"},
		{[]string{"session", "list", "--status", "nope"}, 2, "--status"},
		{[]string{"reconcile", "s1-s3", "--outcome", "maybe"}, 2, "--outcome must be"},
		{[]string{"--addr", dead, "status"}, 1, "no Dex node answered"},
	} {
		var out, errb bytes.Buffer
		code := execute(tc.args, &out, &errb)
		if code != tc.code || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("dexctl %s: exit %d, stderr %q; want exit %d with %q", strings.Join(tc.args, " "), code, errb.String(), tc.code, tc.want)
		}
	}
}
