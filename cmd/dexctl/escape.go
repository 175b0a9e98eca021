package main

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// safe makes text from the cluster fit for a terminal table: control
// characters (ESC, NUL, newlines, tabs …), invalid UTF-8 and the bidi
// controls that can reorder what is shown are written as visible escapes,
// so a message cannot move the cursor, recolour the terminal or disguise
// itself. JSON output is left as it is: its encoder escapes for itself.
func safe(s string) string {
	if !needsEscape(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x80 && unicode.IsControl(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unicode.IsControl(r) || isBidi(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

func needsEscape(s string) bool {
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsControl(r) || isBidi(r) {
			return true
		}
	}
	return false
}

// isBidi reports the invisible characters that change the direction of
// the text around them.
func isBidi(r rune) bool {
	switch {
	case r == 0x061c, r == 0x200e, r == 0x200f:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}
