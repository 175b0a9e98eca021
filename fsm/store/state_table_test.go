package store

import (
	"testing"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// Every case of SnapshotRecord is the record of exactly one table, and a
// record finds its table: a table cannot be persisted and not restored.
func TestStateTables_EveryRecordHasOneTable(t *testing.T) {
	fields := snapshotRecord.Fields()
	if len(registry) != fields.Len() {
		t.Errorf("%d state tables; SnapshotRecord has %d cases", len(registry), fields.Len())
	}
	for i := range fields.Len() {
		fd := fields.Get(i)
		var found []*stateTable
		for j := range registry {
			if registry[j].record == fd {
				found = append(found, &registry[j])
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
	if got := stateTableNamed(t, TableEvents).record; got != eventRecord {
		t.Errorf("events travel in %s; writeEventRecord writes %s", got.Name(), eventRecord.Name())
	}
	if registry[0].name != TableMeta {
		t.Errorf("the first table is %s; a snapshot opens with the meta record", registry[0].name)
	}
	if s := schema(Routing{}); len(s.Tables) != len(registry) {
		t.Errorf("the schema has %d tables; %d are registered", len(s.Tables), len(registry))
	}
}

func stateTableNamed(t *testing.T, name string) *stateTable {
	for i := range registry {
		if registry[i].name == name {
			return &registry[i]
		}
	}
	t.Fatalf("no table %s", name)
	return nil
}
