package fsm

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protodelim"
	"google.golang.org/protobuf/proto"

	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/fsm/store"
)

// Adopt copies a state snapshot (a backup's) from r to w for a restore into
// the running cluster whose state is into. The backup brings the sessions,
// Steps, history, events, Workers and tools; the running cluster keeps what
// belongs to its members and its raft log:
//   - its cluster id (a backup from another cluster becomes this one's);
//   - its node addresses (raft keeps its own configuration on a restore too);
//   - a dispatch epoch no lower than its own, so the next leader's epoch
//     bump opens an epoch above every one either cluster ever handed out,
//     and an attempt leased under either is fenced.
//
// It reads r to the end and fails on a snapshot that does not decode.
func Adopt(r io.Reader, w io.Writer, into *State) error {
	sr, err := store.NewSnapshotReader(r)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	if _, err := bw.Write(sr.Header()); err != nil {
		return err
	}
	opts := protodelim.MarshalOptions{MarshalOptions: proto.MarshalOptions{Deterministic: true}}
	write := func(rec *fsmpb.SnapshotRecord) error {
		_, err := opts.MarshalTo(bw, rec)
		return err
	}
	cur := into.Meta()
	sawMeta := false
	for {
		rec, err := sr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		switch v := rec.Record.(type) {
		case *fsmpb.SnapshotRecord_Meta:
			if sawMeta {
				return fmt.Errorf("%w: record %d: a second meta record", ErrBadSnapshot, sr.Read()-1)
			}
			sawMeta = true
			m := v.Meta.CloneVT()
			m.ClusterId = cur.GetClusterId()
			m.Epoch = max(m.Epoch, cur.GetEpoch())
			if err := write(&fsmpb.SnapshotRecord{Record: &fsmpb.SnapshotRecord_Meta{Meta: m}}); err != nil {
				return err
			}
			for _, node := range into.Nodes() {
				if err := write(&fsmpb.SnapshotRecord{Record: &fsmpb.SnapshotRecord_Node{Node: node}}); err != nil {
					return err
				}
			}
			continue
		case *fsmpb.SnapshotRecord_Node:
			continue
		}
		if err := write(rec); err != nil {
			return err
		}
	}
	if !sawMeta {
		return fmt.Errorf("%w: no meta record", ErrBadSnapshot)
	}
	return bw.Flush()
}
