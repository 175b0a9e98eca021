package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"

	"google.golang.org/protobuf/encoding/protodelim"
	"google.golang.org/protobuf/proto"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// Persist writes each row as the bytes protodelim writes for a
// SnapshotRecord holding it, though it builds none: the format stays the
// one every reader decodes.
func TestStateTables_RecordsAreWhatProtodelimWrites(t *testing.T) {
	d := busyState(t)
	d.do(createToken("t1", "root", fsmpb.TokenRole_TOKEN_ROLE_ADMIN, "", "s1", true))
	d.send("g", "waits in the inbox of a running session")
	d.do(startBulkCmd(&fsmpb.BulkJob{Id: "job", Action: fsmpb.BulkAction_BULK_ACTION_CLOSE, Filter: labelFilter("k", "v")}))
	snap := persist(t, d.f)
	want := bytes.NewBuffer(append([]byte(nil), snap[:len(snapshotMagic)+1]...))
	opts := protodelim.MarshalOptions{MarshalOptions: proto.MarshalOptions{Deterministic: true}}
	in := bytes.NewReader(snap[len(snapshotMagic)+1:])
	seen := map[string]bool{}
	for {
		rec := &fsmpb.SnapshotRecord{}
		err := recordOptions.UnmarshalFrom(in, rec)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		seen[fmt.Sprintf("%T", rec.Record)] = true
		if _, err := opts.MarshalTo(want, rec); err != nil {
			t.Fatal(err)
		}
	}
	if tables := (&fsmpb.SnapshotRecord{}).ProtoReflect().Descriptor().Oneofs().ByName("record").Fields().Len(); len(seen) != tables {
		t.Errorf("the state wrote records of %d tables (%v); want all %d", len(seen), seen, tables)
	}
	if !bytes.Equal(snap, want.Bytes()) {
		t.Fatal("Persist wrote other bytes than protodelim writes for its records")
	}
}
