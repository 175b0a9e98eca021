package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestTakeoverFlags(t *testing.T) {
	c, err := parseTakeoverFlags(nil, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if c.kills != 20 || strings.Join(c.targetsToMeter, ",") != "dex,haproxy" {
		t.Fatalf("defaults: %d kills, targets %v", c.kills, c.targetsToMeter)
	}
	c, err = parseTakeoverFlags([]string{"--kills", "5", "--target", "haproxy"}, &bytes.Buffer{})
	if err != nil || c.kills != 5 || strings.Join(c.targetsToMeter, ",") != "haproxy" {
		t.Fatalf("--kills 5 --target haproxy: %+v, %v", c, err)
	}
	for _, args := range [][]string{
		{"--kills", "0"},
		{"--target", "nginx"},
		{"extra"},
		{"--no-such-flag"},
	} {
		if _, err := parseTakeoverFlags(args, &bytes.Buffer{}); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

func TestTakeover_BadUsageExits2(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"takeover", "--target", "nginx"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "nginx") {
		t.Fatalf("bad target: exit %d, %q", code, errb.String())
	}
	errb.Reset()
	if code := run([]string{"takeover", "--bin", t.TempDir()}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "make build") {
		t.Fatalf("no binaries: exit %d, %q", code, errb.String())
	}
	if code := run([]string{"takeover", "--help"}, &out, &errb); code != 0 {
		t.Fatalf("--help: exit %d", code)
	}
}
