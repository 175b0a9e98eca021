package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/wirerules"
)

// partitionedStatus is a Status of three voters and n partitions; node
// n(k+1) leads partition k, but for partition 2, which has no leader.
func partitionedStatus(n int) *dexv1.StatusResponse {
	st := threeNodes("n1", "leader", "follower", "follower")
	st.Term, st.CommitIndex, st.AppliedIndex, st.Epoch = 7, 100, 99, 3
	for k := range n {
		p := &dexv1.PartitionStatus{Id: uint32(k), Term: uint64(7 + k), CommitIndex: uint64(100 + 10*k), AppliedIndex: uint64(99 + 10*k),
			Epoch: uint64(3 + k), State: "follower", Voters: []string{"n1", "n2", "n3"}}
		if k != 2 {
			p.Leader, p.LeaderGrpcAddress = fmt.Sprintf("n%d", k+1), fmt.Sprintf("10.0.0.%d:7101", k+1)
		}
		st.Partitions = append(st.Partitions, p)
	}
	st.Partitions[0].State = "leader"
	return st
}

func TestStatusJSONListsPartitionsWithTheirLeadersNodeID(t *testing.T) {
	addr := startFakeNode(t, &fakeSessions{}, &fakeAdmin{status: partitionedStatus(3)}, true)
	out, err := run(t, "--addr", addr, "status", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, key := range []string{"leader", "term", "commit_index", "applied_index", "nodes", "workers"} {
		if _, ok := got[key]; !ok {
			t.Errorf("status --json lost key %q", key)
		}
	}
	if got["leader"] != "n1" || got["term"] != 7.0 {
		t.Errorf("top-level leader %v, term %v; want partition 0's: n1, 7", got["leader"], got["term"])
	}
	ps, ok := got["partitions"].([]any)
	if !ok || len(ps) != 3 {
		t.Fatalf("partitions %v; want 3 entries:\n%s", got["partitions"], out)
	}
	want := map[string]any{
		"id": 1.0, "leader": "n2", "leader_grpc_address": "10.0.0.2:7101",
		"term": 8.0, "commit_index": 110.0, "applied_index": 109.0, "epoch": 4.0, "state": "follower",
	}
	if v := fmt.Sprint(ps[1].(map[string]any)["voters"]); v != "[n1 n2 n3]" {
		t.Errorf("partitions[1].voters = %s; want [n1 n2 n3]", v)
	}
	p1 := ps[1].(map[string]any)
	for k, v := range want {
		if p1[k] != v {
			t.Errorf("partitions[1].%s = %v; want %v", k, p1[k], v)
		}
	}
	if len(p1) != len(want)+2 { // and voters, nonvoters
		t.Errorf("partitions[1] %v; want exactly the keys of %v", p1, want)
	}
	if p2 := ps[2].(map[string]any); p2["leader"] != "" {
		t.Errorf("a partition without a leader: leader %v; want \"\"", p2["leader"])
	}
}

func TestStatusTableOfPartitionsOnlyWhenMoreThanOne(t *testing.T) {
	for _, n := range []int{1, 3} {
		addr := startFakeNode(t, &fakeSessions{}, &fakeAdmin{status: partitionedStatus(n)}, true)
		out, err := run(t, "--addr", addr, "status")
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			if strings.Contains(out, "PARTITION") {
				t.Errorf("a cluster of one partition shows a partition table:\n%s", out)
			}
			continue
		}
		lines := strings.Split(out, "\n")
		at := -1
		for i, l := range lines {
			if strings.Join(strings.Fields(l), " ") == "PARTITION LEADER TERM COMMIT APPLIED EPOCH" {
				at = i
			}
		}
		if at < 0 || at+3 >= len(lines) {
			t.Fatalf("no partition table of 3 rows:\n%s", out)
		}
		if nodes := strings.Index(out, "SUFFRAGE"); nodes < 0 || nodes > strings.Index(out, "PARTITION") {
			t.Errorf("the partition table is not after the nodes table:\n%s", out)
		}
		for k, want := range []string{"0 n1 7 100 99 3", "1 n2 8 110 109 4", "2 (none) 9 120 119 5"} {
			if got := strings.Join(strings.Fields(lines[at+1+k]), " "); got != want {
				t.Errorf("partition row %d: %q; want %q", k, got, want)
			}
		}
	}
}

func TestSessionListAndShowNameThePartitionOnlyWhenPartitioned(t *testing.T) {
	const n = 3
	f := &fakeSessions{pageSize: 10}
	seen := map[int]bool{}
	for i := 1; i <= 6; i++ {
		id := fmt.Sprintf("s%d", i)
		f.all = append(f.all, &dexv1.SessionSummary{Id: id, Status: dexv1.SessionStatus_SESSION_STATUS_IDLE, CreatedAtMs: int64(i)})
		seen[wirerules.PartitionOf(id, n)] = true
	}
	if len(seen) < 2 {
		t.Fatalf("the test's ids all live in one of %d partitions; pick others", n)
	}
	for _, c := range []struct {
		name  string
		admin *fakeAdmin // nil: Status fails (not served)
		n     int        // the partitions dexctl should show (0: none)
	}{
		{"partitioned", &fakeAdmin{status: partitionedStatus(n)}, n},
		{"one partition", &fakeAdmin{status: partitionedStatus(1)}, 0},
		{"no Status", nil, 0},
	} {
		addr := startFakeNode(t, f, c.admin, true)
		out, err := run(t, "--addr", addr, "session", "list")
		if err != nil {
			t.Fatalf("%s: session list: %v", c.name, err)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		header := strings.Fields(lines[0])
		if hasColumn := slices.Contains(header, "PARTITION"); hasColumn != (c.n > 0) {
			t.Fatalf("%s: session list header %q; want a PARTITION column: %v", c.name, lines[0], c.n > 0)
		}
		for _, l := range lines[1:] {
			fields := strings.Fields(l)
			if len(fields) != len(header) {
				t.Fatalf("%s: row %q has %d fields, header %d", c.name, l, len(fields), len(header))
			}
			if c.n > 0 {
				col := slices.Index(header, "PARTITION")
				if want := fmt.Sprint(wirerules.PartitionOf(fields[0], c.n)); fields[col] != want {
					t.Errorf("%s: session %s in partition %s; want %s", c.name, fields[0], fields[col], want)
				}
			}
		}

		out, err = run(t, "--addr", addr, "session", "show", "s3")
		if err != nil {
			t.Fatalf("%s: session show: %v", c.name, err)
		}
		want := fmt.Sprintf("\npartition: %d\n", wirerules.PartitionOf("s3", n))
		if got := strings.Contains(out, "partition:"); got != (c.n > 0) || (got && !strings.Contains(out, want)) {
			t.Errorf("%s: session show; want a line %q: %v:\n%s", c.name, strings.TrimSpace(want), c.n > 0, out)
		}
	}
}
