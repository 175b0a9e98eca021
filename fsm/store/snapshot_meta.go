package store

import (
	"fmt"
	"io"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// SnapshotMeta reads the meta record a state snapshot opens with (Persist
// writes it first, in every format version) and nothing after it: the
// cluster the state belongs to, its dispatch epoch and applied index. A
// backup's own cluster id is this one, whatever its file header says.
func SnapshotMeta(r io.Reader) (*fsmpb.ClusterMeta, error) {
	sr, err := NewSnapshotReader(r)
	if err != nil {
		return nil, err
	}
	rec, err := sr.Next()
	if err == io.EOF {
		return nil, fmt.Errorf("%w: record 0: %v", ErrBadSnapshot, err)
	}
	if err != nil {
		return nil, err
	}
	m, ok := rec.Record.(*fsmpb.SnapshotRecord_Meta)
	if !ok {
		return nil, fmt.Errorf("%w: record 0 is not the meta record", ErrBadSnapshot)
	}
	return m.Meta, nil
}
