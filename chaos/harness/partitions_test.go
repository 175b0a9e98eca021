package harness

import (
	"slices"
	"strings"
	"testing"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// Every dexd of a partitioned cluster gets --partitions N; a cluster of 0
// or 1 partition gets the flags it always had.
func TestClusterPassesPartitionsToEveryNode(t *testing.T) {
	for _, tc := range []struct {
		partitions int
		want       []string
	}{{0, nil}, {1, nil}, {3, []string{"--partitions", "3"}}} {
		c, err := NewCluster(ClusterOptions{BinDir: "bin", Dir: t.TempDir(), Partitions: tc.partitions, Args: []string{"--heartbeat-timeout", "3s"}})
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Partitions(); got != max(tc.partitions, 1) {
			t.Fatalf("Partitions() = %d with %d", got, tc.partitions)
		}
		for _, n := range c.Nodes {
			i := slices.Index(n.Args, "--partitions")
			switch {
			case tc.want == nil && i >= 0:
				t.Fatalf("%d partitions: %s has %v", tc.partitions, n.ID, n.Args)
			case tc.want != nil && (i < 0 || !slices.Equal(n.Args[i:i+2], tc.want)):
				t.Fatalf("%d partitions: %s has %v; want %v", tc.partitions, n.ID, n.Args, tc.want)
			}
			if !slices.Contains(n.Args, "--heartbeat-timeout") {
				t.Fatalf("%s lost the cluster's own flags: %v", n.ID, n.Args)
			}
		}
	}
}

func status(leaders ...string) []*dexv1.PartitionStatus {
	var out []*dexv1.PartitionStatus
	for i, l := range leaders {
		out = append(out, &dexv1.PartitionStatus{Id: uint32(i), Leader: l})
	}
	return out
}

func TestLeaderIDsReadsEveryPartitionOfAStatus(t *testing.T) {
	ids, err := leaderIDs(status("n2", "", "n1"), 3)
	if err != nil || !slices.Equal(ids, []string{"n2", "", "n1"}) {
		t.Fatalf("%v %v", ids, err)
	}
	if _, err := leaderIDs(status("n1"), 3); err == nil || !strings.Contains(err.Error(), "--partitions 3") {
		t.Fatalf("a status of one partition in a cluster of 3: %v", err)
	}
	swapped := status("n1", "n2")
	swapped[0].Id, swapped[1].Id = 1, 0
	if _, err := leaderIDs(swapped, 2); err == nil {
		t.Fatal("partitions out of order were accepted")
	}
}

func TestJudgeLeaders(t *testing.T) {
	running := []string{"n1", "n2", "n3"}
	for _, tc := range []struct {
		name   string
		views  [][]string
		run    []string
		spread bool
		why    string // "" : served
	}{
		{"agreed and spread", [][]string{{"n1", "n2", "n3"}, {"n1", "n2", "n3"}, {"n1", "n2", "n3"}}, running, true, ""},
		{"one node leads all, not asked to spread", [][]string{{"n1", "n1", "n1"}, {"n1", "n1", "n1"}, {"n1", "n1", "n1"}}, running, false, ""},
		{"one node leads all", [][]string{{"n1", "n1", "n1"}, {"n1", "n1", "n1"}, {"n1", "n1", "n1"}}, running, true, "n1 leads 3 partitions"},
		{"two running, one leads two", [][]string{{"n1", "n1", "n3"}, {"n1", "n1", "n3"}}, []string{"n1", "n3"}, true, ""},
		{"views differ", [][]string{{"n1", "n2", "n3"}, {"n1", "n2", "n2"}, {"n1", "n2", "n3"}}, running, false, "n2 sees"},
		{"no leader", [][]string{{"n1", "", "n3"}, {"n1", "", "n3"}, {"n1", "", "n3"}}, running, false, "partition 1 has no running leader"},
		{"a dead leader", [][]string{{"n1", "n2", "n3"}, {"n1", "n2", "n3"}}, []string{"n1", "n3"}, false, "partition 1 has no running leader"},
		{"nothing runs", nil, nil, false, "no node is running"},
	} {
		leaders, why := judgeLeaders(tc.views, tc.run, tc.spread)
		if tc.why == "" && (why != "" || !slices.Equal(leaders, tc.views[0])) {
			t.Fatalf("%s: %v %q; want served", tc.name, leaders, why)
		}
		if tc.why != "" && !strings.Contains(why, tc.why) {
			t.Fatalf("%s: %q; want %q", tc.name, why, tc.why)
		}
	}
}
