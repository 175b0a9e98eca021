package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// {{fill:N}} in a script's text, tool-call arguments, error messages and
// summaries becomes N bytes of filler, so a script can make outputs, calls
// and errors as large as a cluster accepts without holding them itself.
// The filler is lowercase letters: it needs no escaping inside JSON.

// maxFill bounds one {{fill:N}}: far above any --max-payload a cluster
// runs with, low enough that a typo cannot exhaust the Worker's memory.
const maxFill = 64 << 20

var fillPattern = regexp.MustCompile(`\{\{fill:(\d+)\}\}`)

const fillAlphabet = "abcdefghijklmnopqrstuvwxyz"

// filler is n bytes of the alphabet, repeated.
func filler(n int) string {
	var b strings.Builder
	b.Grow(n)
	for b.Len() < n {
		b.WriteString(fillAlphabet[:min(len(fillAlphabet), n-b.Len())])
	}
	return b.String()
}

// expandFill replaces every {{fill:N}} in s.
func expandFill(s string) string {
	if !strings.Contains(s, "{{fill:") {
		return s
	}
	return fillPattern.ReplaceAllStringFunc(s, func(m string) string {
		n, _ := strconv.Atoi(fillPattern.FindStringSubmatch(m)[1])
		return filler(n)
	})
}

// checkFill refuses a {{fill:N}} over maxFill.
func checkFill(where, s string) error {
	for _, m := range fillPattern.FindAllStringSubmatch(s, -1) {
		if n, err := strconv.Atoi(m[1]); err != nil || n > maxFill {
			return fmt.Errorf("script: %s: {{fill:%s}} is over %d bytes", where, m[1], maxFill)
		}
	}
	return nil
}

// checkFills checks every {{fill:N}} of a script output.
func checkFills(where string, o Output) error {
	texts := []string{o.Text}
	if o.Error != nil {
		texts = append(texts, o.Error.Message)
	}
	for _, c := range append(append([]ScriptCall(nil), o.ToolCalls...), o.Inline...) {
		texts = append(texts, string(c.Arguments))
	}
	for _, t := range texts {
		if err := checkFill(where, t); err != nil {
			return err
		}
	}
	return nil
}
