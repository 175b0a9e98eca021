package fsmpb

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// Each stored type and the API's type for it have the same fields under the
// same numbers, and the conversions carry every one of them both ways.
func TestEvent_ConvertsEveryField(t *testing.T) {
	convertsEveryField(t, &Event{}, &dexv1.Event{},
		func(m proto.Message) proto.Message { return m.(*Event).API() }, nil)
}

func TestInboxMessage_ConvertsEveryField(t *testing.T) {
	convertsEveryField(t, &InboxMessage{}, &dexv1.Message{},
		func(m proto.Message) proto.Message { return m.(*InboxMessage).API() },
		func(m proto.Message) proto.Message { return InboxMessageFromAPI(m.(*dexv1.Message)) })
}

func TestSession_ConvertsEveryField(t *testing.T) {
	convertsEveryField(t, &Session{}, &dexv1.Session{},
		func(m proto.Message) proto.Message { return m.(*Session).API() }, nil)
}

func TestNilRowsConvertToNil(t *testing.T) {
	if (*Session)(nil).API() != nil || (*Step)(nil).API() != nil || (*Event)(nil).API() != nil ||
		(*InboxMessage)(nil).API() != nil || (*HistoryEntry)(nil).API() != nil ||
		HistoryEntryFromAPI(nil) != nil || InboxMessageFromAPI(nil) != nil {
		t.Fatal("a nil row converted to a message")
	}
}

func TestAclToken_ConvertsEveryFieldButTheHash(t *testing.T) {
	tok := &AclToken{Id: "tok-1", Name: "n", Role: dexv1.TokenRole_TOKEN_ROLE_WORKER, WorkerId: "w1",
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

func TestStep_ConvertsEveryField(t *testing.T) {
	convertsEveryField(t, &Step{}, &dexv1.Step{},
		func(m proto.Message) proto.Message { return m.(*Step).API() }, nil, "waiting_reason")
}

func TestHistoryEntry_ConvertsEveryField(t *testing.T) {
	convertsEveryField(t, &HistoryEntry{}, &dexv1.HistoryEntry{},
		func(m proto.Message) proto.Message { return m.(*HistoryEntry).API() },
		func(m proto.Message) proto.Message { return HistoryEntryFromAPI(m.(*dexv1.HistoryEntry)) })
}

// convertsEveryField sets every field of stored (an empty message) to a value
// of its own, and wants its conversion to the API type (and back, when back
// is given) to encode to the same bytes. apiOnly names the API's fields that
// are filled on reads and never stored.
func convertsEveryField(t *testing.T, stored, api proto.Message, toAPI, back func(proto.Message) proto.Message, apiOnly ...protoreflect.Name) {
	t.Helper()
	storedName, apiName := stored.ProtoReflect().Descriptor().FullName(), api.ProtoReflect().Descriptor().FullName()
	sf, af := stored.ProtoReflect().Descriptor().Fields(), api.ProtoReflect().Descriptor().Fields()
	for _, name := range apiOnly {
		if af.ByName(name) == nil || sf.ByName(name) != nil {
			t.Fatalf("%s is to be a field of %s only", name, apiName)
		}
	}
	if sf.Len()+len(apiOnly) != af.Len() {
		t.Fatalf("%s has %d fields, %s %d: give both the field, and the conversions", storedName, sf.Len(), apiName, af.Len())
	}
	m := stored.ProtoReflect()
	for i := range sf.Len() {
		fd := sf.Get(i)
		other := af.ByNumber(fd.Number())
		if other == nil || other.Name() != fd.Name() || other.Kind() != fd.Kind() || other.Cardinality() != fd.Cardinality() {
			t.Fatalf("field %d %s of %s is not in %s under that number", fd.Number(), fd.Name(), storedName, apiName)
		}
		if fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.EnumKind {
			if fd.Message() != other.Message() || fd.Enum() != other.Enum() {
				t.Fatalf("field %s of %s has another type than in %s", fd.Name(), storedName, apiName)
			}
		}
		m.Set(fd, sampleValue(t, m, fd))
	}
	det := proto.MarshalOptions{Deterministic: true}
	want, err := det.Marshal(stored)
	if err != nil {
		t.Fatal(err)
	}
	converted := toAPI(stored)
	if got, _ := det.Marshal(converted); !bytes.Equal(got, want) {
		t.Fatalf("the conversion to %s dropped or changed a field:\n got %v\nwant %v", apiName, converted, stored)
	}
	if back == nil {
		return
	}
	if got, _ := det.Marshal(back(converted)); !bytes.Equal(got, want) {
		t.Fatalf("the conversion from %s dropped or changed a field:\n got %v\nwant %v", apiName, back(converted), stored)
	}
}

// sampleValue is a value for fd that no other field of the test has.
func sampleValue(t *testing.T, m protoreflect.Message, fd protoreflect.FieldDescriptor) protoreflect.Value {
	n := fd.Number()
	if fd.IsList() {
		list := m.NewField(fd).List()
		if fd.Kind() == protoreflect.StringKind {
			list.Append(protoreflect.ValueOfString("v-" + string(fd.Name())))
			return protoreflect.ValueOfList(list)
		}
		elem := list.NewElement()
		markNested(t, elem.Message(), fd)
		list.Append(elem)
		return protoreflect.ValueOfList(list)
	}
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
	case protoreflect.MessageKind:
		msg := m.NewField(fd).Message()
		markNested(t, msg, fd)
		return protoreflect.ValueOfMessage(msg)
	case protoreflect.EnumKind:
		values := fd.Enum().Values()
		return protoreflect.ValueOfEnum(values.Get(values.Len() - 1).Number())
	}
	t.Fatalf("field %s: kind %s not handled by this test", fd.Name(), fd.Kind())
	return protoreflect.Value{}
}

// markNested sets the first string field of a nested message, so that the
// conversion is seen to carry it.
func markNested(t *testing.T, msg protoreflect.Message, fd protoreflect.FieldDescriptor) {
	fields := msg.Descriptor().Fields()
	for i := range fields.Len() {
		if f := fields.Get(i); f.Kind() == protoreflect.StringKind && !f.IsList() {
			msg.Set(f, protoreflect.ValueOfString("v-"+string(fd.Name())))
			return
		}
	}
	t.Fatalf("field %s: %s has no string field for this test to set", fd.Name(), msg.Descriptor().FullName())
}
