package server

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// The stored event and the API's event have the same fields under the same
// numbers, and the conversion carries every one of them.
func TestAPIEvent_CarriesEveryField(t *testing.T) {
	stored, api := (&fsmpb.Event{}).ProtoReflect().Descriptor().Fields(), (&dexv1.Event{}).ProtoReflect().Descriptor().Fields()
	if stored.Len() != api.Len() {
		t.Fatalf("fsmpb.Event has %d fields, dex.v1.Event %d: give both the field, and apiEvent", stored.Len(), api.Len())
	}
	e := &fsmpb.Event{}
	m := e.ProtoReflect()
	for i := range stored.Len() {
		fd := stored.Get(i)
		if other := api.ByNumber(fd.Number()); other == nil || other.Name() != fd.Name() || other.Kind() != fd.Kind() {
			t.Fatalf("field %d %s of fsmpb.Event is not in dex.v1.Event under that number", fd.Number(), fd.Name())
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
	want, err := det.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	got, err := det.Marshal(apiEvent(e))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("apiEvent dropped or changed a field:\n got %v\nwant %v", apiEvent(e), e)
	}
}
