package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// livePrinter prints a watch's events with the live output of running
// attempts (docs/design/streaming.md) as it arrives: an attempt's text runs
// on one line, its pieces written as they come, until it ends or another
// event is printed.
type livePrinter struct {
	w      io.Writer
	asJSON bool
	// open is the attempt whose text line is being written ("": none).
	open string
}

func (p *livePrinter) print(e *dexv1.Event) error {
	if p.asJSON {
		if e.Output == nil {
			return printEvent(p.w, e, true)
		}
		return json.NewEncoder(p.w).Encode(map[string]any{
			"type": e.Type, "step_id": e.StepId, "attempt": e.Output.Attempt, "offset": e.Output.Offset, "text": e.Output.Text,
		})
	}
	if e.Output == nil {
		if err := p.endLine(); err != nil {
			return err
		}
		return printEvent(p.w, e, false)
	}
	attempt := fmt.Sprintf("%s attempt %d", e.StepId, e.Output.Attempt)
	switch e.Type {
	case "output":
		if p.open != attempt {
			if err := p.endLine(); err != nil {
				return err
			}
			if _, err := fmt.Fprintf(p.w, "%6s %s %-18s %s: ", "", time.Now().UTC().Format("2006-01-02T15:04:05.000Z"), "output", safe(attempt)); err != nil {
				return err
			}
			p.open = attempt
		}
		_, err := io.WriteString(p.w, liveText(e.Output.Text))
		return err
	case "output_ended", "output_abandoned":
		if p.open == attempt {
			note := " [whole: the committed result replaces it]"
			if e.Type == "output_abandoned" {
				note = " [abandoned: the attempt failed; a retry streams anew]"
			}
			p.open = ""
			_, err := fmt.Fprintln(p.w, note)
			return err
		}
	}
	return nil
}

// endLine ends an attempt's text line that is still open.
func (p *livePrinter) endLine() error {
	if p.open == "" {
		return nil
	}
	p.open = ""
	_, err := fmt.Fprintln(p.w)
	return err
}

// liveText is streamed text as a terminal may show it: line breaks kept,
// other control characters escaped.
func liveText(s string) string {
	parts := strings.Split(s, "\n")
	for i, part := range parts {
		parts[i] = safe(part)
	}
	return strings.Join(parts, "\n")
}
