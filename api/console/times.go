package console

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Times are shown in UTC with the zone named, so two people reading the
// same page read the same instant; the relative forms say how long ago.

func fmtMs(ms int64) string {
	if ms == 0 {
		return "—"
	}
	return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05.000 MST")
}

func sinceMs(ms int64) string {
	if ms == 0 {
		return "never"
	}
	return time.Since(time.UnixMilli(ms)).Round(100*time.Millisecond).String() + " ago"
}

// untilMs is the time left until ms.
func untilMs(ms int64) string {
	d := time.Until(time.UnixMilli(ms))
	if d <= 0 {
		return "passed"
	}
	return d.Round(100*time.Millisecond).String() + " left"
}

// agoMs is ms relative to now, in the largest unit that fits: "4m ago",
// "in 20s", "just now" ("" for 0).
func agoMs(ms int64) string {
	if ms == 0 {
		return ""
	}
	return relative(time.Since(time.UnixMilli(ms)))
}

func relative(d time.Duration) string {
	future := d < 0
	if future {
		d = -d
	}
	if d < time.Second {
		return "just now"
	}
	s := short(d)
	if future {
		return "in " + s
	}
	return s + " ago"
}

// short is d in at most two units: 45s, 3m12s, 2h5m, 3d4h.
func short(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d/time.Minute), int(d%time.Minute/time.Second))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
	return fmt.Sprintf("%dd%dh", int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour))
}

// tookMs is how long from..to lasted; with to 0, how long it has run so
// far ("" when from is 0).
func tookMs(from, to int64) string {
	if from == 0 {
		return ""
	}
	if to == 0 {
		return "running " + short(time.Since(time.UnixMilli(from)))
	}
	if to < from {
		return ""
	}
	return short(time.Duration(to-from) * time.Millisecond)
}

// firstLine is s's first line, cut to n characters with an ellipsis.
func firstLine(n int, s string) string {
	s, _, cut := strings.Cut(strings.TrimSpace(s), "\n")
	if utf8.RuneCountInString(s) > n {
		r := []rune(s)
		return string(r[:n]) + "…"
	}
	if cut {
		return s + " …"
	}
	return s
}
