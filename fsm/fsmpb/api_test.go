package fsmpb

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/fsm/fsmpb/internal/convgen"
)

// The generated file is what the descriptors of both schemas generate now: a
// field added to one of them fails here until it is regenerated (go
// generate ./fsm/fsmpb, or make proto), and the generator fails until the
// field is in the other schema too or listed as one-sided.
func TestAPIGen_IsCurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "api_gen.go")
	if err := convgen.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("api_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("api_gen.go is not what the schemas generate: run go generate ./fsm/fsmpb")
	}
}

// The conversions carry every field of a stored type and of its nested
// parts to the API's type, in each direction the code converts them.
func TestRows_ConvertEveryField(t *testing.T) {
	for _, c := range []conversion{
		// An import converts what an archive holds back into rows.
		{&Event{}, &dexv1.Event{}, func(m proto.Message) proto.Message { return m.(*Event).API() }, func(m proto.Message) proto.Message { return EventFromAPI(m.(*dexv1.Event)) }},
		{&InboxMessage{}, &dexv1.Message{}, func(m proto.Message) proto.Message { return m.(*InboxMessage).API() }, func(m proto.Message) proto.Message { return InboxMessageFromAPI(m.(*dexv1.Message)) }},
		{&Session{}, &dexv1.Session{}, func(m proto.Message) proto.Message { return m.(*Session).API() }, func(m proto.Message) proto.Message { return SessionFromAPI(m.(*dexv1.Session)) }},
		{&HistoryEntry{}, &dexv1.HistoryEntry{}, func(m proto.Message) proto.Message { return m.(*HistoryEntry).API() }, func(m proto.Message) proto.Message { return HistoryEntryFromAPI(m.(*dexv1.HistoryEntry)) }},
		// A Step from the API leaves out waiting_reason, which reads fill.
		{&Step{}, &dexv1.Step{}, func(m proto.Message) proto.Message { return m.(*Step).API() }, nil},
	} {
		t.Run(string(c.stored.ProtoReflect().Descriptor().Name()), c.check)
	}
}

// The parts of rows convert to the API's; a Worker's report, a registered
// tool and a node's addresses convert from it, where they are proposed.
func TestParts_ConvertEveryField(t *testing.T) {
	for _, c := range []conversion{
		{&Turn{}, &dexv1.Turn{}, func(m proto.Message) proto.Message { return m.(*Turn).API() }, func(m proto.Message) proto.Message { return TurnFromAPI(m.(*dexv1.Turn)) }},
		{&CallState{}, &dexv1.CallState{}, func(m proto.Message) proto.Message { return m.(*CallState).API() }, func(m proto.Message) proto.Message { return CallStateFromAPI(m.(*dexv1.CallState)) }},
		{&Attempt{}, &dexv1.Attempt{}, func(m proto.Message) proto.Message { return m.(*Attempt).API() }, func(m proto.Message) proto.Message { return AttemptFromAPI(m.(*dexv1.Attempt)) }},
		{stored: &WorkerInfo{}, api: &dexv1.WorkerInfo{}, toAPI: func(m proto.Message) proto.Message { return m.(*WorkerInfo).API() }},
		{&ToolSpec{}, &dexv1.ToolSpec{}, func(m proto.Message) proto.Message { return m.(*ToolSpec).API() }, func(m proto.Message) proto.Message { return ToolSpecFromAPI(m.(*dexv1.ToolSpec)) }},
		{&ToolCall{}, &dexv1.ToolCall{}, func(m proto.Message) proto.Message { return m.(*ToolCall).API() }, func(m proto.Message) proto.Message { return ToolCallFromAPI(m.(*dexv1.ToolCall)) }},
		{&InlineResult{}, &dexv1.InlineResult{}, func(m proto.Message) proto.Message { return m.(*InlineResult).API() }, func(m proto.Message) proto.Message { return InlineResultFromAPI(m.(*dexv1.InlineResult)) }},
		{&NodeInfo{}, &dexv1.NodeInfo{}, func(m proto.Message) proto.Message { return m.(*NodeInfo).API() }, func(m proto.Message) proto.Message { return NodeInfoFromAPI(m.(*dexv1.NodeInfo)) }},
		{stored: &AttemptRef{}, api: &dexv1.AttemptRef{}, fromAPI: func(m proto.Message) proto.Message { return AttemptRefFromAPI(m.(*dexv1.AttemptRef)) }},
		{stored: &AttemptResult{}, api: &dexv1.AttemptResult{}, fromAPI: func(m proto.Message) proto.Message { return AttemptResultFromAPI(m.(*dexv1.AttemptResult)) }},
		{stored: &ModelOutput{}, api: &dexv1.ModelOutput{}, fromAPI: func(m proto.Message) proto.Message { return ModelOutputFromAPI(m.(*dexv1.ModelOutput)) }},
		{stored: &ToolResult{}, api: &dexv1.ToolResult{}, fromAPI: func(m proto.Message) proto.Message { return ToolResultFromAPI(m.(*dexv1.ToolResult)) }},
		{stored: &PollResult{}, api: &dexv1.PollResult{}, fromAPI: func(m proto.Message) proto.Message { return PollResultFromAPI(m.(*dexv1.PollResult)) }},
		{stored: &AttemptFailure{}, api: &dexv1.AttemptFailure{}, fromAPI: func(m proto.Message) proto.Message { return AttemptFailureFromAPI(m.(*dexv1.AttemptFailure)) }},
	} {
		t.Run(string(c.stored.ProtoReflect().Descriptor().Name()), c.check)
	}
}

func TestNilRowsConvertToNil(t *testing.T) {
	if (*Session)(nil).API() != nil || (*Step)(nil).API() != nil || (*Event)(nil).API() != nil ||
		(*InboxMessage)(nil).API() != nil || (*HistoryEntry)(nil).API() != nil ||
		(*Attempt)(nil).API() != nil || AttemptResultFromAPI(nil) != nil || ModelOutputFromAPI(nil) != nil ||
		ToolSpecFromAPI(nil) != nil || (*Turn)(nil).API() != nil {
		t.Fatal("a nil row converted to a message")
	}
}

// Every message and enum type the state or the log stores is the state
// machine's own: none of the rows, commands or their parts is a dex.v1 type.
func TestStoredTypes_AreNotTheAPIs(t *testing.T) {
	for _, root := range []proto.Message{&Command{}, &SnapshotRecord{}} {
		seen := map[protoreflect.FullName]bool{}
		var walk func(md protoreflect.MessageDescriptor)
		walk = func(md protoreflect.MessageDescriptor) {
			if seen[md.FullName()] {
				return
			}
			seen[md.FullName()] = true
			if md.ParentFile().Package() != "dex.fsm.v1" {
				t.Errorf("%s is stored in the log or a snapshot: give the state machine its own type", md.FullName())
				return
			}
			for i := range md.Fields().Len() {
				fd := md.Fields().Get(i)
				if fd.Message() != nil {
					walk(fd.Message())
				}
				if fd.Enum() != nil && fd.Enum().ParentFile().Package() != "dex.fsm.v1" {
					t.Errorf("%s is an enum of %s: give the state machine its own", fd.Enum().FullName(), fd.FullName())
				}
			}
		}
		walk(root.ProtoReflect().Descriptor())
	}
}

func TestAclToken_ConvertsEveryFieldButTheHash(t *testing.T) {
	tok := &AclToken{Id: "tok-1", Name: "n", Role: TokenRole_TOKEN_ROLE_WORKER, WorkerId: "w1",
		CreatedAtMs: 5, Revoked: true, RevokedAtMs: 7, SecretSha256: "ab"}
	sf, af := tok.ProtoReflect().Descriptor().Fields(), (&dexv1.AclToken{}).ProtoReflect().Descriptor().Fields()
	if sf.Len() != af.Len()+1 || af.ByName("secret_sha256") != nil {
		t.Fatalf("fsmpb.AclToken has %d fields, dex.v1.AclToken %d: they differ by the hash alone, which the API lacks", sf.Len(), af.Len())
	}
	for i := range sf.Len() {
		if sf.Get(i).Name() != "secret_sha256" && !tok.ProtoReflect().Has(sf.Get(i)) {
			t.Fatalf("this test does not set %s: set it", sf.Get(i).Name())
		}
	}
	shown := tok.API()
	tok.SecretSha256 = ""
	want, _ := proto.MarshalOptions{Deterministic: true}.Marshal(tok)
	got, _ := proto.MarshalOptions{Deterministic: true}.Marshal(shown)
	if !bytes.Equal(got, want) {
		t.Fatalf("the API's token %v; want every field of %v", shown, tok)
	}
}

// conversion is a stored type, the API's type for it, and the conversions
// the code has between them (one may be nil).
type conversion struct {
	stored, api    proto.Message
	toAPI, fromAPI func(proto.Message) proto.Message
}

// check, once for each member of the widest oneof, fills every field of the
// converted message, nested parts included, with a value of its own, and
// wants its conversion to encode to the same bytes.
func (c conversion) check(t *testing.T) {
	for choice := range widestOneof(c.stored.ProtoReflect().Descriptor(), 0) {
		if c.toAPI != nil {
			convertsFilled(t, c.stored, c.toAPI, choice)
		}
		if c.fromAPI != nil {
			convertsFilled(t, c.api, c.fromAPI, choice)
		}
	}
}

// convertsFilled fills a new message of from's type and wants convert to
// keep every field of it.
func convertsFilled(t *testing.T, from proto.Message, convert func(proto.Message) proto.Message, choice int) {
	t.Helper()
	m := from.ProtoReflect().New()
	fill(t, m, choice, 0)
	det := proto.MarshalOptions{Deterministic: true}
	want, err := det.Marshal(m.Interface())
	if err != nil {
		t.Fatal(err)
	}
	converted := convert(m.Interface())
	// A field the other side does not have is not converted (convgen's
	// oneSided says why): the rest must be.
	for name := range storedOnly {
		if fd := m.Descriptor().Fields().ByName(name.Name()); fd != nil && fd.FullName() == name {
			m.Clear(fd)
		}
	}
	if want, err = det.Marshal(m.Interface()); err != nil {
		t.Fatal(err)
	}
	if got, _ := det.Marshal(converted); !bytes.Equal(got, want) {
		t.Fatalf("the conversion of %s dropped or changed a field:\n got %v\nwant %v", from.ProtoReflect().Descriptor().FullName(), converted, m.Interface())
	}
}

// sameEnum wants the stored enum to have the API enum's values, each under
// its name and number, and no other: a stored number means what the API
// shows it as.
func sameEnum(t *testing.T, stored, api protoreflect.EnumDescriptor) {
	t.Helper()
	if stored.Name() != api.Name() || stored.Values().Len() != api.Values().Len() {
		t.Fatalf("enum %s has %d values, %s %d: give both the value", stored.FullName(), stored.Values().Len(), api.FullName(), api.Values().Len())
	}
	for i := range stored.Values().Len() {
		v := stored.Values().Get(i)
		if other := api.Values().ByNumber(v.Number()); other == nil || other.Name() != v.Name() {
			t.Fatalf("%s = %d is not %s's value %d", v.FullName(), v.Number(), api.FullName(), v.Number())
		}
	}
}

// widestOneof is how many members the widest oneof of md or of its nested
// messages has (1 when none has a oneof).
func widestOneof(md protoreflect.MessageDescriptor, depth int) int {
	n := 1
	for i := range md.Oneofs().Len() {
		n = max(n, md.Oneofs().Get(i).Fields().Len())
	}
	if depth < 8 {
		for i := range md.Fields().Len() {
			if sub := md.Fields().Get(i).Message(); sub != nil {
				n = max(n, widestOneof(sub, depth+1))
			}
		}
	}
	return n
}

// storedOnly are the fields one side has and the other not (convgen's
// oneSided) besides the token's hash (TestAclToken_ConvertsEveryFieldButTheHash),
// which fill leaves unset.
var storedOnly = map[protoreflect.FullName]bool{
	"dex.v1.Event.output":                 true, // live output, relayed and never stored
	"dex.fsm.v1.Session.import":           true, // an import in progress is never shown
	"dex.fsm.v1.Session.fold_due_through": true, // the leader's fold index reads it
	"dex.fsm.v1.Turn.call_repeats":        true, // the loop guard's counts
	"dex.fsm.v1.Turn.trace":               true, // the leader's spans read it
	"dex.fsm.v1.Step.trace":               true, // the leader's spans read it
	"dex.fsm.v1.InboxMessage.trace":       true, // given to the turn it starts
}

// fill sets every field of m, and of its nested messages, to a value of its
// own; of each oneof it sets the member choice names (modulo its size).
func fill(t *testing.T, m protoreflect.Message, choice, depth int) {
	t.Helper()
	if depth > 8 {
		t.Fatalf("%s nests too deep for this test", m.Descriptor().FullName())
	}
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if o := fd.ContainingOneof(); o != nil && o.Fields().Get(choice%o.Fields().Len()) != fd {
			continue
		}
		if storedOnly[fd.FullName()] {
			continue
		}
		switch {
		case fd.IsList():
			list := m.NewField(fd).List()
			if fd.Kind() == protoreflect.MessageKind {
				elem := list.NewElement()
				fill(t, elem.Message(), choice, depth+1)
				list.Append(elem)
			} else {
				list.Append(scalar(t, fd))
			}
			m.Set(fd, protoreflect.ValueOfList(list))
		case fd.Kind() == protoreflect.MessageKind:
			sub := m.NewField(fd)
			fill(t, sub.Message(), choice, depth+1)
			m.Set(fd, sub)
		default:
			m.Set(fd, scalar(t, fd))
		}
	}
}

// scalar is a value for fd that no other field of its message has.
func scalar(t *testing.T, fd protoreflect.FieldDescriptor) protoreflect.Value {
	n := fd.Number()
	switch fd.Kind() {
	case protoreflect.StringKind:
		return protoreflect.ValueOfString("v-" + string(fd.Name()))
	case protoreflect.Uint64Kind:
		return protoreflect.ValueOfUint64(uint64(n))
	case protoreflect.Int64Kind:
		return protoreflect.ValueOfInt64(int64(n))
	case protoreflect.Uint32Kind:
		return protoreflect.ValueOfUint32(uint32(n))
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte("v-" + string(fd.Name())))
	case protoreflect.EnumKind:
		values := fd.Enum().Values()
		return protoreflect.ValueOfEnum(values.Get(values.Len() - 1).Number())
	}
	t.Fatalf("field %s: kind %s not handled by this test", fd.Name(), fd.Kind())
	return protoreflect.Value{}
}

// Each stored enum has the values of the API's enum of the same name, so a
// number the log or a snapshot keeps shows as what it meant.
func TestEnums_AreTheAPIs(t *testing.T) {
	enums := File_dex_fsm_v1_enums_proto.Enums()
	if enums.Len() == 0 {
		t.Fatal("no stored enums")
	}
	for i := range enums.Len() {
		stored := enums.Get(i)
		api, err := protoregistry.GlobalTypes.FindEnumByName(protoreflect.FullName("dex.v1." + stored.Name()))
		if err != nil {
			t.Fatalf("%s has no dex.v1 enum of its name: %v", stored.FullName(), err)
		}
		sameEnum(t, stored, api.Descriptor())
	}
}

// A Step read back from the API is the stored Step: every field but the
// read-time waiting_reason, which is left out, and the trace, which is
// never shown (an imported Step belongs to no trace of this cluster).
func TestStep_FromAPIKeepsEveryStoredField(t *testing.T) {
	for choice := range widestOneof((&Step{}).ProtoReflect().Descriptor(), 0) {
		m := (&Step{}).ProtoReflect().New()
		fill(t, m, choice, 0)
		stored := m.Interface().(*Step)
		api := stored.API()
		api.WaitingReason = "no Worker serves it"
		back := StepFromAPI(api)
		stored.Trace = nil
		if !proto.Equal(back, stored) {
			t.Fatalf("a Step through the API and back: %v; want %v", back, stored)
		}
	}
}
