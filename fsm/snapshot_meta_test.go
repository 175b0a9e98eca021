package fsm

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protodelim"

	"github.com/dexhq/dex/fsm/fsmpb"
)

func TestSnapshotMetaReadsTheStatesOwnClusterID(t *testing.T) {
	var snap bytes.Buffer
	if err := adoptState(t, "aaaa", 2, nil, "s1").Snapshot().Persist(&snap); err != nil {
		t.Fatal(err)
	}
	m, err := SnapshotMeta(&snap)
	if err != nil {
		t.Fatal(err)
	}
	if m.GetClusterId() != "aaaa" || m.GetEpoch() != 2 {
		t.Fatalf("meta = %v", m)
	}
}

func TestSnapshotMetaRefusesWhatIsNotASnapshotsOpening(t *testing.T) {
	nodeFirst := bytes.NewBufferString(snapshotMagic + "\x03")
	if _, err := protodelim.MarshalTo(nodeFirst, &fsmpb.SnapshotRecord{Record: &fsmpb.SnapshotRecord_Node{Node: &fsmpb.NodeInfo{Id: "n1"}}}); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		data []byte
		want string
	}{
		"not a snapshot":    {[]byte("DEXBACKUP 2\n"), "not a Dex state snapshot"},
		"empty":             {nil, "not a Dex state snapshot"},
		"unknown version":   {[]byte(snapshotMagic + "\x09"), "format version 9"},
		"no record":         {[]byte(snapshotMagic + "\x03"), "record 0: EOF"},
		"record cut short":  {[]byte(snapshotMagic + "\x03\x10\x0a"), "record 0"},
		"meta is not first": {nodeFirst.Bytes(), "record 0 is not the meta record"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := SnapshotMeta(bytes.NewReader(tc.data))
			if !errors.Is(err, ErrBadSnapshot) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("SnapshotMeta = %v, want ErrBadSnapshot mentioning %q", err, tc.want)
			}
		})
	}
}
