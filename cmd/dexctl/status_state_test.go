package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

func withStateSize(st *dexv1.StatusResponse) *dexv1.StatusResponse {
	st.StateSize = &dexv1.StateSize{
		TotalRows: 1503, TotalBytes: 2_345_678, AppliedIndex: 812,
		LastSnapshotBytes: 2_100_000, LastSnapshotIndex: 800,
		Tables: []*dexv1.TableSize{
			{Table: "meta", Rows: 1, Bytes: 42},
			{Table: "sessions", Rows: 2, Bytes: 1_536},
			{Table: "history", Rows: 300, Bytes: 1_200_000},
			{Table: "steps", Rows: 1200, Bytes: 1_144_100},
			{Table: "tokens"},
		},
	}
	return st
}

// status prints the state's total size, the last snapshot's and the tables
// that hold rows, the largest first; --json carries every table.
func TestStatusShowsTheStateSize(t *testing.T) {
	addr := startFakeNode(t, &fakeSessions{}, &fakeAdmin{status: withStateSize(threeNodes("n1", "leader", "follower", "follower"))}, true)
	var out, errb bytes.Buffer
	if code := execute([]string{"--addr", addr, "status"}, &out, &errb); code != 0 {
		t.Fatalf("dexctl status: exit %d, stderr %s", code, errb.String())
	}
	for _, want := range []string{
		"state: 2.3 MB in 1503 rows (applied index 812)   last snapshot: 2.1 MB (entry 800)\n",
		"by table (bytes/rows): history 1.2 MB/300  steps 1.1 MB/1200  sessions 1.5 kB/2  meta 42 B/1\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("dexctl status shows no %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "tokens") {
		t.Errorf("dexctl status shows an empty table:\n%s", out.String())
	}

	out.Reset()
	if code := execute([]string{"--addr", addr, "status", "--json"}, &out, &errb); code != 0 {
		t.Fatalf("dexctl status --json: exit %d, stderr %s", code, errb.String())
	}
	var got statusJSON
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	s := got.StateSize
	if s == nil || s.TotalBytes != 2_345_678 || s.TotalRows != 1503 || s.LastSnapshotBytes != 2_100_000 || len(s.Tables) != 5 ||
		s.Tables[3] != (tableSizeJSON{Table: "steps", Rows: 1200, Bytes: 1_144_100}) {
		t.Fatalf("status --json state_size %+v; want the cluster's figures, every table", s)
	}
}

// A node that does not report the state's size shows the nodes without it.
func TestStatusWithoutAStateSize(t *testing.T) {
	addr := startFakeNode(t, &fakeSessions{}, &fakeAdmin{status: threeNodes("n1", "leader", "follower", "follower")}, true)
	var out, errb bytes.Buffer
	if code := execute([]string{"--addr", addr, "status"}, &out, &errb); code != 0 || strings.Contains(out.String(), "state:") {
		t.Fatalf("dexctl status: exit %d:\n%s", code, out.String())
	}
}
