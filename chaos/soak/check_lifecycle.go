package soak

import (
	"bytes"
	"fmt"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// The checker's part about the lifecycle mode: a session may leave the
// cluster only once its close was asked for and the retention passed since
// it closed; with an archive, every session closed before the last
// retention window is in it, byte-identical to what the API returned for
// it once it was closed.

// Violation kinds of the lifecycle mode.
const (
	VDeletedOpen    = "deleted-open"    // a session left the cluster and no close of it was asked for before
	VDeletedEarly   = "deleted-early"   // a closed session left the cluster before its retention passed
	VArchiveMissing = "archive-missing" // a session deleted, or closed before the last retention window, is not in the archive
	VArchiveDiffers = "archive-differs" // the archived object differs from the export of the closed session, or does not verify
)

// archiveSlack is how long past a session's retention the check waits for
// the leader to have archived and deleted it (the deletes run every
// second; an election may delay them).
const archiveSlack = 15 * time.Second

// LifecycleInput is what the lifecycle checks judge.
type LifecycleInput struct {
	Retention time.Duration
	// StartUnixMs: the wall-clock time of the history's zero (Op.Call and
	// Op.Return count from it), to compare with the cluster's times.
	StartUnixMs int64
	// Closed: the sessions the clients saw closed, with their exports.
	Closed map[string]*ClosedSession
	// FinalAt: since the soak started, when the final reads were over; a
	// session not in Final was gone by then.
	FinalAt time.Duration
	// Archive (nil: no archive): each session's archived object, read
	// after the soak; ArchiveErr: why one could not be read (not found
	// is absent from both).
	Archive    map[string][]byte
	ArchiveErr map[string]string
}

// LifecycleCounts says how much the lifecycle checks looked at.
type LifecycleCounts struct {
	Closed        int `json:"closed"`       // sessions whose close was acknowledged
	SeenClosed    int `json:"seen_closed"`  // … seen closed by their client
	Exported      int `json:"exported"`     // … and exported through the API
	Deleted       int `json:"deleted"`      // sessions seen gone after they existed
	NotExported   int `json:"not_exported"` // closed and deleted before an export was had: their writes are not checked
	ArchiveDue    int `json:"archive_due"`  // sessions that must be in the archive
	Archived      int `json:"archived"`     // sessions found in the archive
	ArchiveSameAs int `json:"archive_same"` // archived objects compared byte for byte with the export
}

// gone is when a session was first seen gone, after it was known to exist.
type gone struct {
	at  time.Duration // the seeing call's return
	how string
}

// lifecycleFacts gathers, per session, when it was known to exist, the
// closes asked for and when it was first seen gone.
type lifecycleFacts struct {
	existed map[string]time.Duration // return of the first call that showed it
	closes  map[string][]Op          // closes acknowledged or unanswered
	gone    map[string]gone
}

func factsOf(in CheckInput) lifecycleFacts {
	f := lifecycleFacts{existed: map[string]time.Duration{}, closes: map[string][]Op{}, gone: map[string]gone{}}
	for _, op := range in.Ops {
		shows := op.Answer == AnsOK && (op.Kind == OpCreate || op.Kind == OpRead || op.Kind == OpSend || op.Kind == OpClose)
		if t, ok := f.existed[op.Session]; shows && (!ok || time.Duration(op.Return) < t) {
			f.existed[op.Session] = time.Duration(op.Return)
		}
		if op.Kind == OpClose && op.Answer != AnsRefused {
			f.closes[op.Session] = append(f.closes[op.Session], op)
		}
	}
	for _, op := range in.Ops {
		t, ok := f.existed[op.Session]
		if !ok || op.Code != "NotFound" || time.Duration(op.Call) < t {
			continue
		}
		if g, seen := f.gone[op.Session]; !seen || time.Duration(op.Return) < g.at {
			f.gone[op.Session] = gone{at: time.Duration(op.Return), how: op.Kind + " answered NotFound"}
		}
	}
	for id := range f.existed {
		if _, ok := in.Final[id]; !ok && in.Final != nil {
			if _, seen := f.gone[id]; !seen {
				f.gone[id] = gone{at: in.Life.FinalAt, how: "not in the final state"}
			}
		}
	}
	return f
}

// checkLifecycle judges every deletion and, with an archive, the archive.
func checkLifecycle(in CheckInput, res *CheckResult, add func(kind, session, format string, args ...any)) {
	life := in.Life
	if life == nil {
		return
	}
	f := factsOf(in)
	c := &LifecycleCounts{}
	res.Lifecycle = c
	c.Deleted = len(f.gone)
	for id := range f.closes {
		for _, op := range f.closes[id] {
			if op.Answer == AnsOK {
				c.Closed++
				break
			}
		}
	}
	for _, cs := range life.Closed {
		if cs.ClosedAtMs != 0 {
			c.SeenClosed++
		}
		if cs.Export != nil {
			c.Exported++
		}
	}
	retMs := life.Retention.Milliseconds()
	for _, id := range sortedKeys(keysOf(f.gone)) {
		g := f.gone[id]
		goneAbs := life.StartUnixMs + g.at.Milliseconds()
		var first *Op
		for i, op := range f.closes[id] {
			if time.Duration(op.Call) < g.at && (first == nil || op.Call < first.Call) {
				first = &f.closes[id][i]
			}
		}
		if first == nil {
			add(VDeletedOpen, id, "the session was gone (%s at %s) and no close of it had been asked for", g.how, g.at.Round(time.Millisecond))
			continue
		}
		closedAbs, from := life.StartUnixMs+time.Duration(first.Call).Milliseconds(), "its close was asked for"
		if cs := life.Closed[id]; cs != nil && cs.ClosedAtMs != 0 {
			closedAbs, from = cs.ClosedAtMs, "it closed"
		}
		if goneAbs < closedAbs+retMs {
			add(VDeletedEarly, id, "the session was gone (%s) %s after %s; the retention is %s", g.how, time.Duration(goneAbs-closedAbs)*time.Millisecond, from, life.Retention)
		}
		if cs := life.Closed[id]; cs == nil || cs.Export == nil {
			c.NotExported++
		}
	}
	if life.Archive == nil {
		return
	}
	dueBy := life.StartUnixMs + life.FinalAt.Milliseconds() - archiveSlack.Milliseconds()
	for _, id := range sortedKeys(keysOf(life.Closed)) {
		cs := life.Closed[id]
		obj, archived := life.Archive[id]
		_, deleted := f.gone[id]
		due := deleted || cs.ClosedAtMs != 0 && cs.ClosedAtMs+retMs <= dueBy
		if due {
			c.ArchiveDue++
		}
		switch {
		case life.ArchiveErr[id] != "":
			add(VArchiveDiffers, id, "its archived object cannot be read: %s", life.ArchiveErr[id])
		case !archived && due:
			add(VArchiveMissing, id, "closed at %s, retention %s, %s: the archive has no object for it", msTime(cs.ClosedAtMs), life.Retention, map[bool]string{true: "deleted", false: "due for deletion before the final reads"}[deleted])
		case archived && cs.Export != nil:
			c.ArchiveSameAs++
			if !bytes.Equal(obj, cs.Export) {
				add(VArchiveDiffers, id, "its archived object (%d bytes) differs from its export once closed (%d bytes)%s", len(obj), len(cs.Export), firstDifference(obj, cs.Export))
			}
		}
	}
	// Deleted sessions the clients never saw closed must be archived too.
	for _, id := range sortedKeys(keysOf(f.gone)) {
		if _, seen := life.Closed[id]; seen {
			continue
		}
		if _, archived := life.Archive[id]; !archived && life.ArchiveErr[id] == "" {
			c.ArchiveDue++
			add(VArchiveMissing, id, "the session was deleted (%s) and the archive has no object for it", f.gone[id].how)
		}
	}
	c.Archived = len(life.Archive)
}

func firstDifference(a, b []byte) string {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return fmt.Sprintf(", first at byte %d", i)
		}
	}
	return ""
}

func msTime(ms int64) string {
	if ms == 0 {
		return "an unknown time"
	}
	return time.UnixMilli(ms).UTC().Format("15:04:05.000")
}

// judgedSessions is every session the checks of writes and executions
// judge: the final state and, in the lifecycle mode, the closed sessions
// deleted since, as their export shows them.
func judgedSessions(in CheckInput) map[string]*dexv1.GetSessionResponse {
	if in.Life == nil {
		return in.Final
	}
	out := make(map[string]*dexv1.GetSessionResponse, len(in.Final))
	for id, r := range in.Final {
		out[id] = r
	}
	for _, id := range sortedKeys(keysOf(in.Life.Closed)) {
		cs := in.Life.Closed[id]
		if _, ok := out[id]; ok || cs.Export == nil {
			continue
		}
		if r, err := archivedResponse(cs.Export); err == nil {
			out[id] = r
		}
	}
	return out
}
