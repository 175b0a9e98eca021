package server

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// A stored row and the API's type for it have the same fields under the
// same numbers, and the conversion carries every one of them.
func TestAPIEvent_CarriesEveryField(t *testing.T) {
	carriesEveryField(t, &fsmpb.Event{}, &dexv1.Event{}, func(m proto.Message) proto.Message { return apiEvent(m.(*fsmpb.Event)) })
}

func TestAPIMessage_CarriesEveryField(t *testing.T) {
	carriesEveryField(t, &fsmpb.InboxMessage{}, &dexv1.Message{}, func(m proto.Message) proto.Message { return apiMessage(m.(*fsmpb.InboxMessage)) })
}

// carriesEveryField sets every field of stored (an empty message) to a value
// of its own, converts it, and wants the API message's bytes to equal the
// stored one's.
func carriesEveryField(t *testing.T, stored, api proto.Message, convert func(proto.Message) proto.Message) {
	t.Helper()
	storedName, apiName := stored.ProtoReflect().Descriptor().FullName(), api.ProtoReflect().Descriptor().FullName()
	sf, af := stored.ProtoReflect().Descriptor().Fields(), api.ProtoReflect().Descriptor().Fields()
	if sf.Len() != af.Len() {
		t.Fatalf("%s has %d fields, %s %d: give both the field, and the conversion", storedName, sf.Len(), apiName, af.Len())
	}
	m := stored.ProtoReflect()
	for i := range sf.Len() {
		fd := sf.Get(i)
		if other := af.ByNumber(fd.Number()); other == nil || other.Name() != fd.Name() || other.Kind() != fd.Kind() {
			t.Fatalf("field %d %s of %s is not in %s under that number", fd.Number(), fd.Name(), storedName, apiName)
		}
		switch fd.Kind() {
		case protoreflect.StringKind:
			m.Set(fd, protoreflect.ValueOfString("v-"+string(fd.Name())))
		case protoreflect.Uint64Kind:
			m.Set(fd, protoreflect.ValueOfUint64(uint64(fd.Number())))
		case protoreflect.Int64Kind:
			m.Set(fd, protoreflect.ValueOfInt64(int64(fd.Number())))
		default:
			t.Fatalf("field %s: kind %s not handled by this test", fd.Name(), fd.Kind())
		}
	}
	det := proto.MarshalOptions{Deterministic: true}
	want, err := det.Marshal(stored)
	if err != nil {
		t.Fatal(err)
	}
	got, err := det.Marshal(convert(stored))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the conversion to %s dropped or changed a field:\n got %v\nwant %v", apiName, convert(stored), stored)
	}
}
