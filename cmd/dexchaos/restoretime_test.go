package main

import (
	"bytes"
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/dexhq/dex/chaos/soak"
	"github.com/dexhq/dex/fsm"
)

func TestRestoreTimeRefusesBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"restore-time"}, 2, "--data-dir is required"},
		{[]string{"restore-time", "--data-dir", "d", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"restore-time", "--nope"}, 2, "flag provided but not defined"},
		{[]string{"restore-time", "--data-dir", t.TempDir()}, 1, "has no snapshot yet"},
	} {
		var out, errb bytes.Buffer
		if code := run(c.args, &out, &errb); code != c.code || !strings.Contains(errb.String(), c.want) || out.Len() > 0 {
			t.Errorf("%v: exit %d, stderr %q, stdout %q; want exit %d saying %q and nothing on stdout", c.args, code, errb.String(), out.String(), c.code, c.want)
		}
	}
}

func TestRestoreTimePrintsTheNewestSnapshotsTiming(t *testing.T) {
	dir := t.TempDir()
	snaps, err := raft.NewFileSnapshotStore(filepath.Join(dir, "raft"), 2, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	sink, err := snaps.Create(raft.SnapshotVersionMax, 42, 1, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := fsm.New(fsm.Options{}).Snapshot().Persist(sink); err != nil || sink.Close() != nil {
		t.Fatalf("writing the snapshot: %v", err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"restore-time", "--data-dir", dir}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var got soak.RestoreTiming
	if err := json.Unmarshal(out.Bytes(), &got); err != nil || got.Index != 42 || got.Size <= 0 || got.Took <= 0 {
		t.Fatalf("printed %q (%v); want the timing of the snapshot at index 42", out.String(), err)
	}
}
