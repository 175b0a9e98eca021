package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// printWaits lists what a session waits for from a person, with what is
// asked (the call's arguments, the question) and the exact command that
// answers it.
func printWaits(w io.Writer, s sessionJSON, dexctl string) {
	var lines []string
	add := func(format string, a ...any) { lines = append(lines, fmt.Sprintf(format, a...)) }
	for _, st := range s.Steps {
		switch {
		case st.Status == "waiting" && st.Kind == "AwaitToolApproval":
			add("  step %s: approve the call %s of %s?", safe(st.ID), safe(st.CallID), safe(st.Tool))
			add("    arguments: %s", safe(st.Arguments))
			if st.Prompt != "" {
				add("    asked: %s", safe(st.Prompt))
			}
			add("    approve: %s approve %s", dexctl, shellQuote(st.ID))
			add("    deny:    %s deny %s --reason 'why'", dexctl, shellQuote(st.ID))
		case st.Status == "waiting" && st.Kind == "AwaitQuestionAnswer":
			add("  step %s: question: %s", safe(st.ID), safe(st.Prompt))
			add("    answer:  %s answer %s 'your answer'", dexctl, shellQuote(st.ID))
		case st.Status == "waiting" && st.Kind == "AwaitTimer":
			add("  step %s: timer due at %s", safe(st.ID), time.UnixMilli(st.DueAtMs).UTC().Format(time.RFC3339))
		case st.Outcome == "outcome_unknown":
			add("  step %s: the call %s of %s may have run (outcome_unknown)", safe(st.ID), safe(st.CallID), safe(st.Tool))
			add("    arguments: %s", safe(st.Arguments))
			add("    reconcile: %s reconcile %s --outcome succeeded|failed --note 'what you found'", dexctl, shellQuote(st.ID))
		}
	}
	if s.Status == "paused" || s.Status == "errored" {
		add("  session %s is %s", safe(s.ID), s.Status)
		add("    resume:  %s resume %s   (or --drop to drop the kept turn)", dexctl, shellQuote(s.ID))
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintln(w, "\nwaiting for you:")
	fmt.Fprintln(w, strings.Join(lines, "\n"))
}

// commandPrefix is "dexctl" with the --addr this command was given, so a
// printed command reaches the same cluster.
func (g *globals) commandPrefix(cmd *cobra.Command) string {
	if f := cmd.Flags().Lookup("addr"); f != nil && f.Changed {
		return "dexctl --addr " + shellQuote(g.addrs)
	}
	return "dexctl"
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@,", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(safe(s), "'", `'\''`) + "'"
}
