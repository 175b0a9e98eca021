package fsm

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"google.golang.org/protobuf/encoding/protodelim"
	"google.golang.org/protobuf/proto"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// Every case of SnapshotRecord is the record of exactly one table, and a
// record finds its table: a table cannot be persisted and not restored.
func TestStateTables_EveryRecordHasOneTable(t *testing.T) {
	fields := snapshotRecord.Fields()
	if len(stateTables) != fields.Len() {
		t.Errorf("%d state tables; SnapshotRecord has %d cases", len(stateTables), fields.Len())
	}
	for i := range fields.Len() {
		fd := fields.Get(i)
		var found []*stateTable
		for j := range stateTables {
			if stateTables[j].record == fd {
				found = append(found, &stateTables[j])
			}
		}
		if len(found) != 1 {
			t.Errorf("record %s is carried by %d tables; want 1", fd.Name(), len(found))
			continue
		}
		rec := (&fsmpb.SnapshotRecord{}).ProtoReflect()
		rec.Set(fd, rec.NewField(fd))
		if tableOf(rec.Interface().(*fsmpb.SnapshotRecord)) != found[0] {
			t.Errorf("a %s record does not find its table", fd.Name())
		}
	}
	if got := stateTableNamed(t, tableEvents).record; got != eventRecord {
		t.Errorf("events travel in %s; writeEventRecord writes %s", got.Name(), eventRecord.Name())
	}
	if stateTables[0].name != tableMeta {
		t.Errorf("the first table is %s; a snapshot opens with the meta record", stateTables[0].name)
	}
	if s := schema(); len(s.Tables) != len(stateTables) {
		t.Errorf("the schema has %d tables; %d are registered", len(s.Tables), len(stateTables))
	}
}

func stateTableNamed(t *testing.T, name string) *stateTable {
	for i := range stateTables {
		if stateTables[i].name == name {
			return &stateTables[i]
		}
	}
	t.Fatalf("no table %s", name)
	return nil
}

// Persist writes each row as the bytes protodelim writes for a
// SnapshotRecord holding it, though it builds none: the format stays the
// one every reader decodes.
func TestStateTables_RecordsAreWhatProtodelimWrites(t *testing.T) {
	d := busyState(t)
	d.do(createToken("t1", "root", fsmpb.TokenRole_TOKEN_ROLE_ADMIN, "", "s1", true))
	d.send("g", "waits in the inbox of a running session")
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
		seen[tableOf(rec).name] = true
		if _, err := opts.MarshalTo(want, rec); err != nil {
			t.Fatal(err)
		}
	}
	if len(seen) != len(stateTables) {
		t.Errorf("the state wrote records of %d tables (%v); want all %d", len(seen), seen, len(stateTables))
	}
	if !bytes.Equal(snap, want.Bytes()) {
		t.Fatal("Persist wrote other bytes than protodelim writes for its records")
	}
}
