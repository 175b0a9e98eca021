package fsm

import (
	"google.golang.org/protobuf/encoding/protodelim"

	"github.com/dexhq/dex/fsm/store"
)

// The snapshot format the tests write and read by hand.
const (
	snapshotMagic   = store.SnapshotMagic
	snapshotVersion = store.SnapshotVersion
)

var recordOptions = protodelim.UnmarshalOptions{MaxSize: MaxRecordBytes}
