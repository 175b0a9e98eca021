package store

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// MaxRecordBytes bounds one record of a snapshot or a backup as protobuf
// bounds any message (2 GiB). Every reader of a snapshot (a node's restore,
// `dexd verify`, a backup's inspect and restore) takes any record up to it,
// so none refuses a row that Apply wrote: rows stay far below it by the
// limits a request is checked against (docs/limits.md), and damage is caught
// by the snapshot's CRC64 and the backup's SHA-256, not by this bound.
const MaxRecordBytes = math.MaxInt32

// SnapshotReader reads a snapshot's header, then its records one by one:
// the one decoder of every reader of a snapshot.
type SnapshotReader struct {
	br      *bufio.Reader
	version byte
	n       int    // records read: the next one's number
	buf     []byte // the record being decoded, reused: decoding copies what it keeps
}

// NewSnapshotReader reads the header and checks the format version is one
// this build reads.
func NewSnapshotReader(r io.Reader) (*SnapshotReader, error) {
	br := bufio.NewReader(r)
	head := make([]byte, len(SnapshotMagic)+1)
	if _, err := io.ReadFull(br, head); err != nil || string(head[:len(SnapshotMagic)]) != SnapshotMagic {
		return nil, ErrBadSnapshot
	}
	version := head[len(SnapshotMagic)]
	if version < SnapshotVersionV1 || version > SnapshotVersion {
		return nil, fmt.Errorf("%w: format version %d, this build reads %d to %d", ErrBadSnapshot, version, SnapshotVersionV1, SnapshotVersion)
	}
	return &SnapshotReader{br: br, version: version}, nil
}

// Header is the bytes the snapshot began with.
func (r *SnapshotReader) Header() []byte { return append([]byte(SnapshotMagic), r.version) }

// RecordBytes is the size of the record Next returned last.
func (r *SnapshotReader) RecordBytes() int { return len(r.buf) }

// Read is how many records were read: the number of the next one.
func (r *SnapshotReader) Read() int { return r.n }

// Next returns the next record, or io.EOF after the last one. An error
// names the record by its number.
func (r *SnapshotReader) Next() (*fsmpb.SnapshotRecord, error) {
	size, err := binary.ReadUvarint(r.br)
	if errors.Is(err, io.EOF) {
		return nil, io.EOF
	}
	if err != nil {
		return nil, r.bad(fmt.Errorf("its length: %w", noEOF(err)))
	}
	if size > MaxRecordBytes {
		return nil, r.bad(fmt.Errorf("its length %d is over %d bytes", size, MaxRecordBytes))
	}
	if uint64(cap(r.buf)) < size {
		r.buf = make([]byte, size)
	}
	r.buf = r.buf[:size]
	if _, err := io.ReadFull(r.br, r.buf); err != nil {
		return nil, r.bad(noEOF(err))
	}
	// The generated decoder, not reflection: a restore spends most of its
	// time here.
	rec := &fsmpb.SnapshotRecord{}
	if err := rec.UnmarshalVT(r.buf); err != nil {
		return nil, r.bad(err)
	}
	if rec.Record == nil {
		return nil, r.bad(errors.New("it has an unknown type"))
	}
	r.n++
	return rec, nil
}

// noEOF reads an end of input inside a record as the truncation it is.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// bad wraps an error about record n, the one being read, as ErrBadSnapshot.
func (r *SnapshotReader) bad(err error) error {
	return fmt.Errorf("%w: record %d: %v", ErrBadSnapshot, r.n, err)
}

// SnapshotSummary is what a check of a snapshot read.
type SnapshotSummary struct {
	Version   int
	Records   int
	Largest   int    // bytes of the largest record
	ClusterID string // from the meta record
}

// CheckSnapshot decodes every record of a snapshot with the decoder a
// restore runs, without building the state: a snapshot it passes restores
// record for record. It reads r to the end.
func CheckSnapshot(r io.Reader) (SnapshotSummary, error) {
	sr, err := NewSnapshotReader(r)
	if err != nil {
		return SnapshotSummary{}, err
	}
	sum := SnapshotSummary{Version: int(sr.version)}
	for {
		rec, err := sr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return sum, err
		}
		sum.Records++
		sum.Largest = max(sum.Largest, sr.RecordBytes())
		if m := rec.GetMeta(); m != nil {
			sum.ClusterID = m.GetClusterId()
		}
	}
	return sum, nil
}
