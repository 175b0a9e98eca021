package fsm

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protodelim"
	"google.golang.org/protobuf/proto"

	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/fsm/store"
)

func (d *driver) setRetention(count uint64, age time.Duration) {
	d.t.Helper()
	d.do(&fsmpb.Command{Body: &fsmpb.Command_SetEventRetention{SetEventRetention: &fsmpb.SetEventRetention{
		Epoch: d.epoch, Retention: &fsmpb.EventRetention{Count: count, AgeMs: age.Milliseconds()},
	}}})
}

func (d *driver) prune(maxEvents uint32, sessions ...string) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_PruneEvents{PruneEvents: &fsmpb.PruneEvents{
		Epoch: d.epoch, MaxEvents: maxEvents, SessionIds: sessions,
	}}}
}

func seqs(evs []*fsmpb.Event) []uint64 {
	out := []uint64{}
	for _, e := range evs {
		out = append(out, e.Seq)
	}
	return out
}

// checkLog asserts a session's EventLog agrees with the events it keeps.
func checkLog(t *testing.T, st *State, session string) *fsmpb.EventLog {
	t.Helper()
	log, evs := st.EventLog(session), st.Events(session, 0)
	if log == nil {
		t.Fatalf("session %s has no event log", session)
	}
	if log.Count != uint64(len(evs)) {
		t.Fatalf("event log of %s counts %d events; %d are kept", session, log.Count, len(evs))
	}
	if len(evs) > 0 && (log.FirstSeq != evs[0].Seq || log.LastSeq != evs[len(evs)-1].Seq) {
		t.Fatalf("event log of %s spans %d..%d; kept events are %v", session, log.FirstSeq, log.LastSeq, seqs(evs))
	}
	if len(evs) > 0 && log.DroppedThrough >= evs[0].Seq {
		t.Fatalf("event log of %s says %d was dropped, but %d is kept", session, log.DroppedThrough, evs[0].Seq)
	}
	return log
}

func TestEvents_TrimmedToTheRetentionCountPerSession(t *testing.T) {
	d := newDriver(t)
	d.setRetention(3, 0)
	d.createSession("a", "", "hi") // created, message, turn, step: 4 events
	d.createSession("b", "", "")
	for range 5 {
		d.send("a", "more")
	}
	st := d.f.State()
	if got := len(st.Events("a", 0)); got != 3 {
		t.Fatalf("session a keeps %d events; want the retention count 3", got)
	}
	log := checkLog(t, st, "a")
	if log.DroppedThrough == 0 {
		t.Fatal("no dropped event recorded")
	}
	if got := st.Events("b", 0); len(got) != 1 || got[0].Type != "session_created" {
		t.Fatalf("session b lost events to a's retention: %v", got)
	}
	// A watch from a position reads from there.
	if got := st.Events("a", log.FirstSeq); len(got) != 2 || got[0].Seq <= log.FirstSeq {
		t.Fatalf("events after %d: %v", log.FirstSeq, seqs(got))
	}
}

func TestEvents_ALowerCountShrinksBoundedPerCommand(t *testing.T) {
	d := newDriver(t)
	d.createSession("a", "", "hi")
	for range 20 {
		d.send("a", "more")
	}
	before := len(d.f.State().Events("a", 0))
	d.setRetention(2, 0)
	d.send("a", "one more") // +1, trims at most maxTrimPerEmit
	if got := len(d.f.State().Events("a", 0)); got != before+1-maxTrimPerEmit {
		t.Fatalf("after one emit %d events kept; want %d (bounded trim)", got, before+1-maxTrimPerEmit)
	}
	// The leader's prune finishes it, within max_events per command.
	kept := len(d.f.State().Events("a", 0))
	d.do(d.prune(5, "a", "unknown"))
	if got := len(d.f.State().Events("a", 0)); got != kept-5 {
		t.Fatalf("a prune of at most 5 left %d of %d events", got, kept)
	}
	d.do(d.prune(MaxPruneEvents, "a"))
	if got := len(d.f.State().Events("a", 0)); got != 2 {
		t.Fatalf("%d events kept; want 2", got)
	}
	checkLog(t, d.f.State(), "a")
}

func TestEvents_PrunedByAgeOldestFirstBoundedPerCommand(t *testing.T) {
	d := newDriver(t)
	d.setRetention(0, time.Hour)
	d.createSession("a", "", "")
	d.createSession("b", "", "")
	d.send("b", "x") // b: created, message, turn, step
	d.advance(2 * time.Hour)
	d.send("a", "young")
	st := d.f.State()
	total := len(st.Events("a", 0)) + len(st.Events("b", 0))
	var youngA []*fsmpb.Event
	for _, e := range st.Events("a", 0) {
		if e.AtMs == d.now {
			youngA = append(youngA, e)
		}
	}

	d.do(d.prune(2))
	st = d.f.State()
	if got := len(st.Events("a", 0)) + len(st.Events("b", 0)); got != total-2 {
		t.Fatalf("%d events kept after a prune of at most 2; want %d", got, total-2)
	}
	if got := st.Events("a", 0); got[0].Type != "message_received" {
		t.Fatalf("a's creation event (the oldest) was not pruned first: %v", got[0])
	}
	d.do(d.prune(100))
	st = d.f.State()
	if got := st.Events("b", 0); len(got) != 0 {
		t.Fatalf("b keeps %d old events", len(got))
	}
	if got := st.Events("a", 0); len(got) != len(youngA) || !proto.Equal(got[0], youngA[0]) {
		t.Fatalf("a keeps %v; want its young events %v", seqs(got), seqs(youngA))
	}
	checkLog(t, st, "a")
	if log := checkLog(t, st, "b"); log.FirstSeq != 0 || log.DroppedThrough != log.LastSeq {
		t.Fatalf("b's log after all its events went: %v", log)
	}
	// Nothing old is left: a prune changes nothing but the applied index.
	before := d.stateBytes()
	d.do(d.prune(100))
	if !bytes.Equal(before, d.stateBytes()) {
		t.Fatal("a prune with nothing to do changed the state")
	}
	// b's next event starts its log again.
	d.send("b", "back")
	if log := checkLog(t, d.f.State(), "b"); log.FirstSeq == 0 {
		t.Fatal("b's new events are not in its log")
	}
}

func TestEvents_BadOrStaleRetentionCommandsAreRefused(t *testing.T) {
	d := newDriver(t)
	d.createSession("a", "", "hi")
	stale := d.epoch
	d.newEpoch()
	setRet := func(epoch uint64, r *fsmpb.EventRetention) *fsmpb.Command {
		return &fsmpb.Command{Body: &fsmpb.Command_SetEventRetention{SetEventRetention: &fsmpb.SetEventRetention{Epoch: epoch, Retention: r}}}
	}
	d.refused(setRet(stale, &fsmpb.EventRetention{Count: 1}), CodeFailedPrecondition)
	d.refused(setRet(d.epoch, nil), CodeInvalid)
	d.refused(setRet(d.epoch, &fsmpb.EventRetention{AgeMs: -1}), CodeInvalid)
	d.setRetention(1, time.Millisecond)
	d.advance(time.Second)
	stalePrune := d.prune(10, "a")
	stalePrune.GetPruneEvents().Epoch = stale
	d.refused(stalePrune, CodeFailedPrecondition)
	d.refused(d.prune(0), CodeInvalid)
	d.refused(d.prune(MaxPruneEvents+1), CodeInvalid)
	d.refused(d.prune(1, make([]string, MaxPruneSessions+1)...), CodeInvalid)
}

func TestEvents_RetentionAndLogsSurviveSnapshotRestore(t *testing.T) {
	d := busyState(t)
	d.setRetention(3, time.Hour)
	d.send("c", "trim me")
	snap := persist(t, d.f)
	g := New(Options{})
	if err := g.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snap, persist(t, g)) {
		t.Fatal("the restored state persists to different bytes")
	}
	if got := g.State().EventRetention(); got.Count != 3 || got.AgeMs != time.Hour.Milliseconds() {
		t.Fatalf("restored retention %v", got)
	}
	for _, s := range d.f.State().Sessions() {
		if !proto.Equal(d.f.State().EventLog(s.Id), g.State().EventLog(s.Id)) {
			t.Fatalf("event log of %s differs after restore", s.Id)
		}
	}
	// Both trim and prune identically afterwards.
	d2 := &driver{t: t, f: g, index: d.index, now: d.now, epoch: d.epoch}
	d.advance(2 * time.Hour)
	d2.now = d.now
	after := &fsmpb.Command{NowMs: d.now, Body: &fsmpb.Command_SendMessage{SendMessage: &fsmpb.SendMessage{SessionId: "c", MessageId: "after", Text: "after"}}}
	for _, dd := range []*driver{d, d2} {
		dd.do(proto.Clone(after).(*fsmpb.Command))
		dd.do(dd.prune(7, "z"))
	}
	if !bytes.Equal(persist(t, d.f), persist(t, d2.f)) {
		t.Fatal("the restored state diverged on the same commands")
	}
	checkLog(t, d2.f.State(), "c")
}

// A snapshot of an older build: version 2 counted every event in its
// EventLog record and had no ordinals; version 1 had no EventLog records.
func TestEvents_AnOlderSnapshotsEventsAreUpgraded(t *testing.T) {
	d := busyState(t)
	snap := persist(t, d.f)
	for _, keepLogs := range []bool{true, false} {
		r := bytes.NewReader(snap[len(snapshotMagic)+1:])
		var old bytes.Buffer
		old.WriteString(snapshotMagic)
		old.WriteByte(2)
		for {
			rec := &fsmpb.SnapshotRecord{}
			if err := protodelim.UnmarshalFrom(r, rec); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatal(err)
			}
			if l := rec.GetEventLog(); l != nil {
				if !keepLogs {
					continue
				}
				view := d.f.State().EventLog(l.SessionId)
				l.Count, l.LastSeq, l.FirstOrdinal, l.FirstAtMs = view.Count, view.LastSeq, 0, 0
			}
			if ev := rec.GetEvent(); ev != nil {
				ev.Ordinal = 0
			}
			if _, err := protodelim.MarshalTo(&old, rec); err != nil {
				t.Fatal(err)
			}
		}
		g := New(Options{})
		if err := g.Restore(&old); err != nil {
			t.Fatal(err)
		}
		for _, s := range d.f.State().Sessions() {
			if !proto.Equal(d.f.State().EventLog(s.Id), g.State().EventLog(s.Id)) {
				t.Fatalf("logs kept %v: upgraded event log of %s: %v; want %v", keepLogs, s.Id, g.State().EventLog(s.Id), d.f.State().EventLog(s.Id))
			}
		}
		if !bytes.Equal(snap, persist(t, g)) {
			t.Fatalf("logs kept %v: the upgraded state does not persist as the current one", keepLogs)
		}
	}
}

func TestEvents_AWatchOfOneSessionIsNotWokenByAnother(t *testing.T) {
	d := newDriver(t)
	d.createSession("a", "", "")
	d.createSession("ab", "", "") // shares a's id as a prefix
	ch := d.f.State().EventsWatch("a")
	d.send("ab", "busy")
	d.createSession("b", "", "hello")
	d.do(d.prune(10, "ab"))
	select {
	case <-ch:
		t.Fatal("the watch of session a fired on commands of other sessions")
	default:
	}
	d.send("a", "wake")
	select {
	case <-ch:
	default:
		t.Fatal("the watch of session a did not fire on a's new event")
	}
}

// A long session's events span many pages: every read from any position,
// trims across page boundaries, and a snapshot round trip see the same
// events as a plain list kept beside them.
func TestEvents_PagesReadTrimAndRestoreLikeOneList(t *testing.T) {
	d := newDriver(t)
	d.createSession("a", "", "hi")
	d.createSession("ab", "", "") // a's id is its prefix: never mixed in
	for i := range 40 {
		d.send("a", "more")
		if i%3 == 0 {
			d.send("ab", "other")
		}
	}
	all := d.f.State().Events("a", 0)
	if len(all) <= 2*store.EventPageSize {
		t.Fatalf("the fixture keeps %d events: not enough for three pages", len(all))
	}
	check := func(st *State, want []*fsmpb.Event) {
		t.Helper()
		checkLog(t, st, "a")
		for from := uint64(0); from <= want[len(want)-1].Seq+1; from++ {
			var exp []uint64
			for _, e := range want {
				if e.Seq > from {
					exp = append(exp, e.Seq)
				}
			}
			got := seqs(st.Events("a", from))
			if len(exp) == 0 {
				exp = []uint64{}
			}
			if !slicesEqual(got, exp) {
				t.Fatalf("events of a after %d: %v; want %v", from, got, exp)
			}
		}
		for _, e := range st.Events("a", 0) {
			if e.SessionId != "a" {
				t.Fatalf("an event of %s among a's", e.SessionId)
			}
		}
	}
	check(d.f.State(), all)

	// Trim across the first page boundary and beyond.
	d.setRetention(uint64(len(all)-store.EventPageSize-3), 0)
	d.do(d.prune(MaxPruneEvents, "a"))
	kept := d.f.State().Events("a", 0)
	if len(kept) != len(all)-store.EventPageSize-3 || kept[0].Seq != all[store.EventPageSize+3].Seq {
		t.Fatalf("after the trim a keeps %v; want all from %d", seqs(kept), all[store.EventPageSize+3].Seq)
	}
	check(d.f.State(), kept)

	snap := persist(t, d.f)
	g := New(Options{})
	if err := g.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	check(g.State(), kept)
	if !bytes.Equal(snap, persist(t, g)) {
		t.Fatal("the restored state does not persist as the one it came from")
	}
}

// A snapshot that lists one event twice is damaged: refused, state unchanged.
func TestEvents_ASnapshotWithAnEventTwiceIsRefused(t *testing.T) {
	// Format 2 pages its events after sorting them, this format as it reads
	// them: both refuse an event listed twice.
	for _, version := range []byte{2, snapshotVersion} {
		d := newDriver(t)
		d.createSession("a", "", "hi")
		var buf bytes.Buffer
		buf.WriteString(snapshotMagic)
		buf.WriteByte(version)
		ev := d.f.State().Events("a", 0)[0]
		for range 2 {
			if _, err := protodelim.MarshalTo(&buf, &fsmpb.SnapshotRecord{Record: &fsmpb.SnapshotRecord_Event{Event: ev}}); err != nil {
				t.Fatal(err)
			}
		}
		before := persist(t, d.f)
		err := d.f.Restore(&buf)
		if !errors.Is(err, ErrBadSnapshot) || !strings.Contains(err.Error(), "listed twice") {
			t.Fatalf("restore of a format-%d snapshot with an event twice: %v; want ErrBadSnapshot, listed twice", version, err)
		}
		if !bytes.Equal(before, persist(t, d.f)) {
			t.Fatalf("a refused format-%d restore changed the state", version)
		}
	}
}

func TestEvents_ASnapshotWithEventsOutOfOrderIsRefused(t *testing.T) {
	d := newDriver(t)
	d.createSession("a", "", "hi")
	evs := d.f.State().Events("a", 0)
	if len(evs) < 2 {
		t.Fatalf("session a has %d events; the test needs two", len(evs))
	}
	var buf bytes.Buffer
	buf.WriteString(snapshotMagic)
	buf.WriteByte(snapshotVersion)
	for _, ev := range []*fsmpb.Event{evs[1], evs[0]} {
		if _, err := protodelim.MarshalTo(&buf, &fsmpb.SnapshotRecord{Record: &fsmpb.SnapshotRecord_Event{Event: ev}}); err != nil {
			t.Fatal(err)
		}
	}
	before := persist(t, d.f)
	err := d.f.Restore(&buf)
	if !errors.Is(err, ErrBadSnapshot) || !strings.Contains(err.Error(), "out of order") {
		t.Fatalf("restore of a snapshot with events out of order: %v; want ErrBadSnapshot, out of order", err)
	}
	if !bytes.Equal(before, persist(t, d.f)) {
		t.Fatal("a refused restore changed the state")
	}
}

func slicesEqual(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
