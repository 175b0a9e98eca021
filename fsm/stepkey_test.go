package fsm

import (
	"bytes"
	"errors"
	"testing"

	"google.golang.org/protobuf/encoding/protodelim"

	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/fsm/store"
)

func TestStepID_ParsesWhatItWritesAndNothingElse(t *testing.T) {
	for _, c := range []struct {
		session string
		n       uint64
	}{{"a", 1}, {"a-s2", 10}, {"x-s-s", 3}, {"s", 18446744073709551615}} {
		id := StepID(c.session, c.n)
		s, n, ok := store.ParseStepID(id)
		if !ok || s != c.session || n != c.n {
			t.Fatalf("store.ParseStepID(%q) = %q, %d, %v; want %q, %d", id, s, n, ok, c.session, c.n)
		}
	}
	for _, id := range []string{"", "a", "-s1", "a-s", "a-s01", "a-s+1", "a-sx", "a-s1x", "a-s-1"} {
		if s, n, ok := store.ParseStepID(id); ok {
			t.Fatalf("store.ParseStepID(%q) = %q, %d: want no Step id", id, s, n)
		}
	}
}

// Steps are found by id and listed per session in number order, whatever
// their ids sort as (s10 after s9); an id that is no Step's finds nothing.
func TestStepKey_LookupByIDAndSessionOrder(t *testing.T) {
	d := newDriver(t)
	d.createSession("a", "", "")
	d.createSession("a-s1", "", "") // its Steps' ids begin with a Step id of a
	for range 11 {
		d.send("a", "more")
		d.startNext("a", kRunModel).claim().answer("ok")
	}
	d.send("a-s1", "hi")
	st := d.f.State()
	steps := st.Steps("a")
	if len(steps) != 11 {
		t.Fatalf("session a has %d Steps; want 11", len(steps))
	}
	for i, s := range steps {
		if s.Number != uint64(i+1) || s.Id != StepID("a", s.Number) {
			t.Fatalf("Step %d of a is %s (number %d)", i+1, s.Id, s.Number)
		}
		if got := st.Step(s.Id); got == nil || got.Id != s.Id {
			t.Fatalf("Step %s not found by its id", s.Id)
		}
	}
	if other := st.Steps("a-s1"); len(other) != 1 || other[0].Id != "a-s1-s1" {
		t.Fatalf("session a-s1's Steps: %v", other)
	}
	for _, id := range []string{"a", "a-s", "a-s01", "nope-s1", "a-s99"} {
		if got := st.Step(id); got != nil {
			t.Fatalf("Step(%q) found %s", id, got.Id)
		}
	}
	// A command naming such an id is refused as unknown, not a crash.
	res := d.try(&fsmpb.Command{Body: &fsmpb.Command_StartAttempt{StartAttempt: &fsmpb.StartAttempt{StepId: "a-s01", Attempt: 1, WorkerId: "w1", Epoch: d.epoch}}})
	if res.Err == nil || res.Err.Code != CodeNotFound {
		t.Fatalf("StartAttempt of a-s01: %v; want NotFound", res.Err)
	}
}

// A snapshot whose Step id does not match its session and number is damaged.
func TestStepKey_ASnapshotWithAMisnamedStepIsRefused(t *testing.T) {
	d := newDriver(t)
	var buf bytes.Buffer
	buf.WriteString(snapshotMagic)
	buf.WriteByte(snapshotVersion)
	st := &fsmpb.Step{Id: "a-s2", SessionId: "a", Number: 1}
	if _, err := protodelim.MarshalTo(&buf, &fsmpb.SnapshotRecord{Record: &fsmpb.SnapshotRecord_Step{Step: st}}); err != nil {
		t.Fatal(err)
	}
	before := persist(t, d.f)
	if err := d.f.Restore(&buf); !errors.Is(err, ErrBadSnapshot) {
		t.Fatalf("restore: %v; want ErrBadSnapshot", err)
	}
	if !bytes.Equal(before, persist(t, d.f)) {
		t.Fatal("a refused restore changed the state")
	}
}
