package main

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseSize_ReadsBytesAndBinaryUnits(t *testing.T) {
	for in, want := range map[string]int{
		"0": 0, "4096": 4096, "4096B": 4096, "1KiB": 1024, "4KiB": 4096,
		"4kib": 4096, " 2MiB ": 2 << 20, "0KiB": 0,
	} {
		got, err := parseSize(in)
		if err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
}

func TestParseSize_RefusesBadInputClearly(t *testing.T) {
	for _, in := range []string{"", "KiB", "-1", "4KB", "4k", "1.5KiB", "four", "4 GiB", "99999999999"} {
		_, err := parseSize(in)
		if err == nil {
			t.Errorf("parseSize(%q) accepted it", in)
			continue
		}
		if !strings.Contains(err.Error(), in) && in != "" {
			t.Errorf("parseSize(%q): error %q does not name the input", in, err)
		}
	}
	if _, err := parseSize("4MB"); err == nil || !strings.Contains(err.Error(), "KiB or MiB") {
		t.Errorf("parseSize(4MB): %v; want the units it takes named", err)
	}
	if _, err := parseSize("4194304MiB"); err == nil || !strings.Contains(err.Error(), "too large") {
		t.Errorf("parseSize(4194304MiB): %v; want too large", err)
	}
}

func TestPayloadFlag_OverTheLimitIsRefused(t *testing.T) {
	o := options{workers: 1, concurrency: 1, sessions: 1, runs: 1, idleBatch: 1}
	if err := o.payload.Set("4KiB"); err != nil || o.check() != nil {
		t.Fatalf("4KiB refused: %v, %v", err, o.check())
	}
	if o.payload.String() != "4KiB" {
		t.Errorf("String() = %q", o.payload.String())
	}
	o.payload = maxPayload + 1
	if err := o.check(); err == nil || !strings.Contains(err.Error(), "--payload") {
		t.Errorf("check() = %v; want --payload refused", err)
	}
}

func TestFiller_IsExactlyNBytesOfText(t *testing.T) {
	for _, n := range []int{0, 1, 55, 4096, 100000} {
		f := filler(n)
		if len(f) != n || !utf8.ValidString(f) {
			t.Errorf("filler(%d): %d bytes, valid UTF-8 %v", n, len(f), utf8.ValidString(f))
		}
	}
}
