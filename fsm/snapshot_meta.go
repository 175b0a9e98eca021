package fsm

import (
	"bufio"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protodelim"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// SnapshotMeta reads the meta record a state snapshot opens with (Persist
// writes it first, in every format version) and nothing after it: the
// cluster the state belongs to, its dispatch epoch and applied index. A
// backup's own cluster id is this one, whatever its file header says.
func SnapshotMeta(r io.Reader) (*fsmpb.ClusterMeta, error) {
	br := bufio.NewReader(r)
	head := make([]byte, len(snapshotMagic)+1)
	if _, err := io.ReadFull(br, head); err != nil || string(head[:len(snapshotMagic)]) != snapshotMagic {
		return nil, ErrBadSnapshot
	}
	if v := head[len(snapshotMagic)]; v < snapshotVersionV1 || v > snapshotVersion {
		return nil, fmt.Errorf("%w: format version %d, this build reads %d to %d", ErrBadSnapshot, v, snapshotVersionV1, snapshotVersion)
	}
	rec := &fsmpb.SnapshotRecord{}
	if err := protodelim.UnmarshalFrom(br, rec); err != nil {
		return nil, fmt.Errorf("%w: record 0: %v", ErrBadSnapshot, err)
	}
	m, ok := rec.Record.(*fsmpb.SnapshotRecord_Meta)
	if !ok {
		return nil, fmt.Errorf("%w: record 0 is not the meta record", ErrBadSnapshot)
	}
	return m.Meta, nil
}
