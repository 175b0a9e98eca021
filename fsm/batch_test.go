package fsm

import (
	"bytes"
	"errors"
	"io"
	"regexp"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/fsm/store"
)

// logIndexID matches what a command derives from its log index: the id
// of a message a child sends its parent (session@index, or
// session@index.n for the n-th command of a Batch entry).
var logIndexID = regexp.MustCompile(`@[0-9]+(\.[0-9]+)?$`)

// batchedState is f's snapshot with what depends on log indexes taken
// out: the applied index, and the index in ids derived from it. A log
// whose commands travel in Batch entries has fewer, other indexes; every
// other byte of the state must be the same.
func batchedState(t *testing.T, f *FSM) []byte {
	t.Helper()
	var snap bytes.Buffer
	if err := f.Snapshot().Persist(&snap); err != nil {
		t.Fatal(err)
	}
	r, err := store.NewSnapshotReader(&snap)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if m := rec.GetMeta(); m != nil {
			m.AppliedIndex = 0
		}
		withoutLogIndexes(rec.ProtoReflect())
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
}

func withoutLogIndexes(m protoreflect.Message) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			for i := range v.List().Len() {
				withoutLogIndexes(v.List().Get(i).Message())
			}
		case fd.Message() != nil && !fd.IsMap():
			withoutLogIndexes(v.Message())
		case fd.Kind() == protoreflect.StringKind && fd.IsList():
			for i := range v.List().Len() {
				if s := v.List().Get(i).String(); logIndexID.MatchString(s) {
					v.List().Set(i, protoreflect.ValueOfString(logIndexID.ReplaceAllString(s, "@")))
				}
			}
		case fd.Kind() == protoreflect.StringKind && !fd.IsList():
			if s := v.String(); logIndexID.MatchString(s) {
				m.Set(fd, protoreflect.ValueOfString(logIndexID.ReplaceAllString(s, "@")))
			}
		}
		return true
	})
}

// Commands in one Batch entry give each the result it gets alone, in
// order, and leave the state that applying them one by one leaves.
func TestBatch_AppliesEachCommandAsAnEntryOfItsOwn(t *testing.T) {
	alone := newDriver(t)
	batched := New(Options{})
	var snap bytes.Buffer
	if err := alone.f.Snapshot().Persist(&snap); err != nil {
		t.Fatal(err)
	}
	if err := batched.Restore(&snap); err != nil {
		t.Fatal(err)
	}
	cmds := []*fsmpb.Command{
		{Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{SessionId: "s1", MessageId: "m1", Message: "hi"}}},
		{Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{SessionId: "s1", MessageId: "m1", Message: "again"}}}, // refused: it exists
		{Body: &fsmpb.Command_SendMessage{SendMessage: &fsmpb.SendMessage{SessionId: "s1", MessageId: "m2", Text: "more"}}},
		{Body: &fsmpb.Command_SendMessage{SendMessage: &fsmpb.SendMessage{SessionId: "nope", MessageId: "m3", Text: "x"}}}, // refused: no session
		{Ignorable: true}, // of a type from a newer version
	}
	var encoded [][]byte
	var want []*Result
	for _, c := range cmds {
		c.NowMs = alone.now
		data, err := Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		encoded = append(encoded, data)
		alone.index++
		want = append(want, alone.f.ApplyEntry(alone.index, data))
	}
	entry, err := EncodeBatch(encoded)
	if err != nil {
		t.Fatal(err)
	}
	res := batched.ApplyEntry(alone.index, entry)
	if res.Err != nil || len(res.Batch) != len(cmds) {
		t.Fatalf("batch entry: %+v", res)
	}
	for i, r := range res.Batch {
		if (r.Err == nil) != (want[i].Err == nil) || r.Ignored != want[i].Ignored || r.Index != alone.index {
			t.Errorf("command %d: alone %+v, in the batch %+v", i+1, want[i], r)
		}
	}
	if res.Batch[1].Err == nil || res.Batch[3].Err == nil {
		t.Error("the refused commands were accepted in the batch")
	}
	if !bytes.Equal(persist(t, alone.f), persist(t, batched)) {
		t.Error("the batch left another state than the commands one by one (same last index)")
	}
}

// An entry that cannot be applied halts the state machine, inside a
// Batch as alone: a command that does not decode, or one of a type this
// version does not know and that is not marked ignorable.
func TestBatch_HaltsOnACommandItCannotRead(t *testing.T) {
	unknown, err := proto.Marshal(&fsmpb.Command{NowMs: 1}) // no body, not ignorable
	if err != nil {
		t.Fatal(err)
	}
	good, err := Encode(&fsmpb.Command{NowMs: 1, Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{SessionId: "s1"}}})
	if err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string][]byte{"garbage": {0xff, 0xff, 0xff}, "unknown type": unknown} {
		t.Run(name, func(t *testing.T) {
			var halted error
			f := New(Options{OnHalt: func(err error) { halted = err }})
			entry, err := EncodeBatch([][]byte{good, bad})
			if err != nil {
				t.Fatal(err)
			}
			res := f.ApplyEntry(1, entry)
			if halted == nil || res.Err == nil {
				t.Fatalf("a batch with a command it cannot read: halt %v, result %+v", halted, res)
			}
			if f.State().Session("s1") != nil {
				t.Error("a command of the batch that could not be read was applied in part")
			}
		})
	}
}

// A Batch inside a Batch is refused as a command; the others apply.
func TestBatch_RefusesANestedBatch(t *testing.T) {
	d := newDriver(t)
	inner, err := EncodeBatch(nil)
	if err != nil {
		t.Fatal(err)
	}
	good, err := Encode(&fsmpb.Command{NowMs: d.now, Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{SessionId: "s1"}}})
	if err != nil {
		t.Fatal(err)
	}
	entry, err := EncodeBatch([][]byte{inner, good})
	if err != nil {
		t.Fatal(err)
	}
	d.index++
	res := d.f.ApplyEntry(d.index, entry)
	if len(res.Batch) != 2 || res.Batch[0].Err == nil || res.Batch[0].Err.Code != CodeInvalid || res.Batch[1].Err != nil {
		t.Fatalf("nested batch: %+v", res.Batch)
	}
	if d.f.State().Session("s1") == nil {
		t.Error("the command after the nested batch was not applied")
	}
}
