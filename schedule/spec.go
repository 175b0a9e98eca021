// Package schedule is the leader's and the API's side of schedules
// (docs/schedules.md): it parses and checks a schedule's spec, computes
// its slot times and decides what the next FireScheduleSlot carries. The
// state machine never imports it: Apply reads no clock and no zone
// database, it applies the slot times this package computed on the node
// that proposed them.
package schedule

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// MinInterval is the shortest interval a schedule may have.
const MinInterval = time.Second

// MaxCronIterations bounds the slots one decision walks through (a cron
// expression of every minute missed for a week is ten thousand slots):
// past it, the slots left are decided by the next decision.
const MaxCronIterations = 10000

// parser reads standard 5-field expressions and descriptors (@hourly,
// @every is refused: an interval is interval_ms).
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Spec is a checked schedule spec: a cron expression in a zone, or an
// interval from an anchor.
type Spec struct {
	cron     cron.Schedule
	loc      *time.Location
	interval int64 // ms
	anchor   int64 // ms: an interval's slots are anchor + k*interval
}

// Parse checks a spec: exactly one of a cron expression (with an IANA
// zone; empty: UTC) or an interval of at least MinInterval, whose slots
// are anchorMs + k*intervalMs.
func Parse(expr, zone string, intervalMs, anchorMs int64) (*Spec, error) {
	switch {
	case expr == "" && intervalMs == 0:
		return nil, errors.New("a schedule needs a cron expression or an interval")
	case expr != "" && intervalMs != 0:
		return nil, errors.New("a schedule has a cron expression or an interval, not both")
	case intervalMs < 0:
		return nil, fmt.Errorf("the interval must be positive, not %dms", intervalMs)
	case intervalMs > 0 && intervalMs < MinInterval.Milliseconds():
		return nil, fmt.Errorf("the interval must be at least %s, not %dms", MinInterval, intervalMs)
	case intervalMs > 0 && zone != "":
		return nil, errors.New("a time zone goes with a cron expression, not an interval")
	case intervalMs > 0:
		return &Spec{interval: intervalMs, anchor: anchorMs}, nil
	}
	if strings.HasPrefix(strings.TrimSpace(expr), "@every") {
		return nil, errors.New("@every is not a cron expression here: give the interval as an interval")
	}
	if strings.Contains(expr, "TZ=") {
		return nil, errors.New("give the time zone as the time zone, not inside the cron expression")
	}
	loc := time.UTC
	if zone != "" {
		l, err := time.LoadLocation(zone)
		if err != nil {
			return nil, fmt.Errorf("unknown time zone %q (an IANA name such as Europe/Paris): %v", zone, err)
		}
		loc = l
	}
	c, err := parser.Parse(expr)
	if err != nil {
		return nil, fmt.Errorf("bad cron expression %q: %v", expr, err)
	}
	s := &Spec{cron: c, loc: loc}
	// An expression that never comes (Feb 30) is refused: it would owe no slot.
	if s.Next(time.Now().UnixMilli()) == 0 {
		return nil, fmt.Errorf("cron expression %q never fires", expr)
	}
	return s, nil
}

// Next is the first slot strictly after atMs (0: none, for a cron
// expression that never comes).
func (s *Spec) Next(atMs int64) int64 {
	if s.interval > 0 {
		if atMs < s.anchor {
			return s.anchor
		}
		return s.anchor + ((atMs-s.anchor)/s.interval+1)*s.interval
	}
	t := s.cron.Next(time.UnixMilli(atMs).In(s.loc))
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}
