package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestSafeEscapesWhatCouldFoolATerminal(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain text, ünïcode ✓", "plain text, ünïcode ✓"},
		{"red \x1b[31malert\x1b[0m", `red \x1b[31malert\x1b[0m`},
		{"nul\x00byte", `nul\x00byte`},
		{"two\nlines\tand tab", `two\nlines\tand tab`},
		{"invoice \u202egpj.exe", `invoice \u202egpj.exe`},
		{"isolate \u2066x\u2069", `isolate \u2066x\u2069`},
		{"c1 \u009b control", `c1 \u009b control`},
		{"bad \xff utf8", `bad \xff utf8`},
		{"del \x7f", `del \x7f`},
	} {
		if got := safe(tc.in); got != tc.want {
			t.Errorf("safe(%q) = %q; want %q", tc.in, got, tc.want)
		}
	}
}

func TestSessionShowTableEscapesMessages(t *testing.T) {
	var out bytes.Buffer
	printSession(&out, sessionJSON{ID: "s1", Status: "idle", History: []historyJSON{
		{Seq: 1, Kind: "user", Text: "hi \x1b]0;pwned\x07 \u202eevil\x00"},
	}, Steps: []stepJSON{{ID: "s1-s1", Kind: "run_model", Tool: "t\x1b", Status: "done"}}}, 1)
	for _, bad := range []string{"\x1b", "\x00", "\x07", "\u202e"} {
		if strings.Contains(out.String(), bad) {
			t.Fatalf("table output holds %q:\n%s", bad, out.String())
		}
	}
	if !strings.Contains(out.String(), `hi \x1b]0;pwned\x07 \u202eevil\x00`) {
		t.Fatalf("table output:\n%s", out.String())
	}
}
