package store

import (
	"bufio"
	"fmt"
	"io"
	"reflect"

	memdb "github.com/hashicorp/go-memdb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// stateTable is one table of the state: its indexes and how a snapshot
// carries its rows. Each table has one, in stateTables.
type stateTable struct {
	name    string
	indexes indexes
	// record is the field of SnapshotRecord its rows travel in, the one
	// whose message is the row's.
	record protoreflect.FieldDescriptor
	// row reads the row out of one of its records.
	row func(*fsmpb.SnapshotRecord) proto.Message
	// persist writes the table's records (nil: each row in id order).
	persist func(w *snapshotWriter, t *stateTable, tx *Txn) error
	// restore takes the row of one record (nil: it is inserted as it is).
	restore func(r *restoring, row proto.Message) error
}

// indexes are a table's indexes by name; schema sets each one's Name.
type indexes = map[string]*memdb.IndexSchema

// table registers a table whose rows travel in the record field get reads.
func table[R proto.Message](name string, get func(*fsmpb.SnapshotRecord) R, ix indexes) stateTable {
	var none R
	msg := none.ProtoReflect().Descriptor().FullName()
	fields := snapshotRecord.Fields()
	for i := range fields.Len() {
		if fd := fields.Get(i); fd.Message().FullName() == msg {
			return stateTable{name: name, indexes: ix, record: fd, row: func(rec *fsmpb.SnapshotRecord) proto.Message { return get(rec) }}
		}
	}
	panic(fmt.Sprintf("store: table %s: no SnapshotRecord field carries %s", name, msg))
}

// persistedBy gives the table its own way of writing its records.
func (t stateTable) persistedBy(fn func(w *snapshotWriter, t *stateTable, tx *Txn) error) stateTable {
	t.persist = fn
	return t
}

// restoredBy gives the table its own way of taking a record's row.
func (t stateTable) restoredBy(fn func(r *restoring, row proto.Message) error) stateTable {
	t.restore = fn
	return t
}

// snapshotRecord is the oneof of fsmpb.SnapshotRecord that holds the row.
var snapshotRecord = (&fsmpb.SnapshotRecord{}).ProtoReflect().Descriptor().Oneofs().ByName("record")

// tablesByRecord finds a table by the Go type of a record's oneof wrapper.
var tablesByRecord = indexTables(registry)

// indexTables keys the tables by the oneof wrapper type of their records.
// Two tables in one record field, or two of one name, are a bug in the
// list, found when the package loads.
func indexTables(tables []stateTable) map[reflect.Type]*stateTable {
	index := make(map[reflect.Type]*stateTable, len(tables))
	names := map[string]bool{}
	for i := range tables {
		t := &tables[i]
		rec := (&fsmpb.SnapshotRecord{}).ProtoReflect()
		rec.Set(t.record, rec.NewField(t.record))
		w := reflect.TypeOf(rec.Interface().(*fsmpb.SnapshotRecord).Record)
		if index[w] != nil || names[t.name] {
			panic(fmt.Sprintf("store: state tables: %s (record field %s) is listed twice", t.name, t.record.Name()))
		}
		index[w], names[t.name] = t, true
	}
	return index
}

// tableOf returns the table a record belongs to (nil for none).
func tableOf(rec *fsmpb.SnapshotRecord) *stateTable {
	return tablesByRecord[reflect.TypeOf(rec.Record)]
}

// schema is the state store's schema: every table's indexes, those keyed by
// the rules taken from r.
func schema(r Routing) *memdb.DBSchema {
	tables := stateTables(r)
	s := &memdb.DBSchema{Tables: make(map[string]*memdb.TableSchema, len(tables))}
	for _, t := range tables {
		ixs := make(map[string]*memdb.IndexSchema, len(t.indexes))
		for name, ix := range t.indexes {
			named := *ix
			named.Name = name
			ixs[name] = &named
		}
		s.Tables[t.name] = &memdb.TableSchema{Name: t.name, Indexes: ixs}
	}
	return s
}

// snapshotWriter writes the records of a snapshot.
type snapshotWriter struct {
	w   *bufio.Writer
	buf []byte
}

var rowOptions = proto.MarshalOptions{Deterministic: true}

// rows writes each row of the table in id order as one record.
func (w *snapshotWriter) rows(t *stateTable, tx *Txn) error {
	it, err := tx.get(t.name, IndexID)
	if err != nil {
		return err
	}
	for raw := it.Next(); raw != nil; raw = it.Next() {
		if err := w.row(t, raw.(proto.Message)); err != nil {
			return err
		}
	}
	return nil
}

// row writes one row as a record of its table.
func (w *snapshotWriter) row(t *stateTable, row proto.Message) error {
	var err error
	if w.buf, err = rowOptions.MarshalAppend(w.buf[:0], row); err != nil {
		return err
	}
	return w.encoded(t, w.buf)
}

// encoded writes the record of a row already encoded.
func (w *snapshotWriter) encoded(t *stateTable, row []byte) error {
	return writeRecord(w.w, t.record.Number(), row)
}

// writeRecord writes the record of a row already encoded, in a field of
// SnapshotRecord: the bytes protodelim writes for a SnapshotRecord holding
// the row, without building one.
func writeRecord(w io.Writer, field protowire.Number, row []byte) error {
	var hdr [24]byte
	rec := protowire.AppendVarint(hdr[:0], uint64(protowire.SizeTag(field)+protowire.SizeBytes(len(row))))
	rec = protowire.AppendTag(rec, field, protowire.BytesType)
	rec = protowire.AppendVarint(rec, uint64(len(row)))
	if _, err := w.Write(rec); err != nil {
		return err
	}
	_, err := w.Write(row)
	return err
}
