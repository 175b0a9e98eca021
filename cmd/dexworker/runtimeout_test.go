package main

import (
	"io"
	"strings"
	"testing"
	"time"
)

func TestRunTimeoutFlags(t *testing.T) {
	c, err := parseFlags([]string{"--addr", "a:1", "--ledger", "l", "--model-run-timeout", "2m",
		"--tool-run-timeout", "lookup=2s, send_email=500ms"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.modelRunTimeout != 2*time.Minute {
		t.Fatalf("model run timeout %s", c.modelRunTimeout)
	}
	d := &demoTools{polls: map[string]int{}, runTimeouts: c.toolRunTimeouts}
	want := map[string]uint32{"lookup": 2000, "send_email": 500}
	for _, tl := range d.tools() {
		if tl.Spec.RunTimeoutMs != want[tl.Spec.Name] {
			t.Errorf("%s registers a run timeout of %d ms; want %d", tl.Spec.Name, tl.Spec.RunTimeoutMs, want[tl.Spec.Name])
		}
	}

	bad := []struct{ flag, value, want string }{
		{"--tool-run-timeout", "nope=1s", `no demo tool "nope"`},
		{"--tool-run-timeout", "calc=1s", "inline"},
		{"--tool-run-timeout", "lookup", "TOOL=DURATION"},
		{"--tool-run-timeout", "lookup=soon", "a duration from 1ms"},
		{"--tool-run-timeout", "lookup=0s", "a duration from 1ms"},
		{"--tool-run-timeout", "lookup=1s,lookup=2s", "given twice"},
		{"--model-run-timeout", "-1s", "--model-run-timeout must be between"},
	}
	for _, b := range bad {
		_, err := parseFlags([]string{"--addr", "a:1", "--ledger", "l", b.flag, b.value}, io.Discard)
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%s %s: error %v; want %q", b.flag, b.value, err, b.want)
		}
	}
}
