package main

import (
	"fmt"
	"strconv"
	"strings"
)

// maxPayload bounds --payload. A turn's last model input holds three
// payloads (the first output's text and two tool results), and a server
// refuses a model input over half of --max-payload (2 MiB by default), so a
// quarter of that leaves room for the rest of the history.
const maxPayload = 256 << 10

// byteSize is a flag holding a byte count written as a plain number of
// bytes ("4096") or with a binary suffix ("4KiB", "1MiB").
type byteSize int

func (b *byteSize) String() string { return formatSize(int(*b)) }

func (b *byteSize) Set(s string) error {
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	*b = byteSize(n)
	return nil
}

var sizeUnits = []struct {
	suffix string
	bytes  int
}{{"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}

// parseSize reads "0", "4096", "4096B", "4KiB" or "1MiB" (suffixes case
// insensitive). Decimal units (KB, MB) are refused rather than guessed.
func parseSize(s string) (int, error) {
	t := strings.TrimSpace(s)
	unit := 1
	for _, u := range sizeUnits {
		if len(t) > len(u.suffix) && strings.EqualFold(t[len(t)-len(u.suffix):], u.suffix) {
			t, unit = t[:len(t)-len(u.suffix)], u.bytes
			break
		}
	}
	n, err := strconv.ParseUint(strings.TrimSpace(t), 10, 31)
	if err != nil {
		return 0, fmt.Errorf("size %q: want a whole number of bytes, optionally with KiB or MiB (e.g. 4096, 4KiB, 1MiB)", s)
	}
	if int(n) > (1<<31-1)/unit {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return int(n) * unit, nil
}

// formatSize writes n the way parseSize reads it, in the largest whole unit.
func formatSize(n int) string {
	for _, u := range sizeUnits[:2] {
		if n >= u.bytes && n%u.bytes == 0 {
			return strconv.Itoa(n/u.bytes) + u.suffix
		}
	}
	return strconv.Itoa(n)
}

// filler is n bytes of printable ASCII (valid UTF-8 for a proto string),
// not one repeated byte, so it looks like text rather than padding.
func filler(n int) string {
	const words = "the quick brown fox jumps over the lazy dog 0123456789 "
	if n <= 0 {
		return ""
	}
	return strings.Repeat(words, n/len(words)+1)[:n]
}
