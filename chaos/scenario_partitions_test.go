package chaos

import (
	"encoding/json"
	"strings"
	"testing"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/wirerules"
)

// A cell's session ids are drawn into the cell's partition; on one raft
// group they are as they always were.
func TestPartitionedMatrix_SessionIDsLiveInTheCellsPartition(t *testing.T) {
	if got := idIn("s1-42", 2, 1); got != "s1-42" {
		t.Fatalf("one partition: %q", got)
	}
	if got := idIn("s1-42", 0, 0); got != "s1-42" {
		t.Fatalf("no partitions option: %q", got)
	}
	for k := range 3 {
		id := idIn("s1-42", k, 3)
		if !strings.HasPrefix(id, "s1-42-") || wirerules.PartitionOf(id, 3) != k {
			t.Fatalf("partition %d: %q lives in %d", k, id, wirerules.PartitionOf(id, 3))
		}
		if again := idIn("s1-42", k, 3); again != id {
			t.Fatalf("partition %d: %q, then %q", k, id, again)
		}
	}
	cells, err := SelectCells([]string{ColTakeover}, "")
	if err != nil {
		t.Fatal(err)
	}
	homes := map[int]bool{}
	for _, c := range cells {
		homes[homePartition(c, 3)] = true
	}
	if len(homes) != 3 {
		t.Fatalf("the takeover cells live in partitions %v; want all 3", homes)
	}
}

func partitionStatus(leader string, applied uint64) *dexv1.PartitionStatus {
	return &dexv1.PartitionStatus{Leader: leader, AppliedIndex: applied, State: "Follower"}
}

func TestPartitionedMatrix_RestartedNodeCaughtUp(t *testing.T) {
	commits := []uint64{10, 20, 30}
	for _, tc := range []struct {
		name  string
		parts []*dexv1.PartitionStatus
		want  bool
	}{
		{"every partition applied", []*dexv1.PartitionStatus{partitionStatus("n1", 10), partitionStatus("n2", 25), partitionStatus("n3", 30)}, true},
		{"one behind", []*dexv1.PartitionStatus{partitionStatus("n1", 10), partitionStatus("n2", 19), partitionStatus("n3", 30)}, false},
		{"a leader unknown", []*dexv1.PartitionStatus{partitionStatus("n1", 10), partitionStatus("", 20), partitionStatus("n3", 30)}, false},
		{"a partition missing", []*dexv1.PartitionStatus{partitionStatus("n1", 10), partitionStatus("n2", 20)}, false},
	} {
		got, said := partitionsCaughtUp(tc.parts, commits)
		if got != tc.want || said == "" {
			t.Fatalf("%s: %v (%s); want %v", tc.name, got, said, tc.want)
		}
	}
}

func bgStep(attempts ...dexv1.AttemptStatus) *dexv1.Step {
	st := &dexv1.Step{Id: "bg-s1", Kind: kindRunModel, Status: stepDone, Outcome: oSucceeded}
	for i, a := range attempts {
		st.Attempts = append(st.Attempts, &dexv1.Attempt{N: uint32(i + 1), Status: a})
	}
	return st
}

func TestPartitionedMatrix_BackgroundTurnsMustNotFail(t *testing.T) {
	idle := func(turns uint64, steps ...*dexv1.Step) *dexv1.GetSessionResponse {
		return &dexv1.GetSessionResponse{Session: &dexv1.Session{Status: dexv1.SessionStatus_SESSION_STATUS_IDLE, TurnsCompleted: turns}, Steps: steps}
	}
	if err := bgUnfailed(idle(2, bgStep(aSucceeded), bgStep(aSucceeded)), 2); err != nil {
		t.Fatalf("two clean turns: %v", err)
	}
	if err := bgUnfailed(idle(1, bgStep(aSucceeded)), 2); err == nil || !strings.Contains(err.Error(), "1 of 2 turns") {
		t.Fatalf("a turn missing: %v", err)
	}
	if err := bgUnfailed(idle(1, bgStep(dexv1.AttemptStatus_ATTEMPT_STATUS_FAILED, aSucceeded)), 1); err == nil || !strings.Contains(err.Error(), "first attempt") {
		t.Fatalf("a second attempt: %v", err)
	}
	failed := bgStep(aSucceeded)
	failed.Outcome = oFailed
	if err := bgUnfailed(idle(1, failed), 1); err == nil {
		t.Fatal("a failed Step was accepted")
	}
	errored := idle(1, bgStep(aSucceeded))
	errored.Session.Status = dexv1.SessionStatus_SESSION_STATUS_ERRORED
	if err := bgUnfailed(errored, 1); err == nil {
		t.Fatal("an errored session was accepted")
	}
}

// A report of partitioned clusters says so; one of one raft group is as
// it always was.
func TestPartitionedMatrix_Report(t *testing.T) {
	plain := sampleReport()
	one := sampleReport()
	one.Partitions = 1
	if plain.Markdown() != one.Markdown() {
		t.Fatal("--partitions 1 changed matrix.md")
	}
	pj, _ := plain.JSON()
	oj, _ := one.JSON()
	if string(pj) != string(oj) || strings.Contains(string(pj), "partitions") {
		t.Fatalf("--partitions 1 changed matrix.json:\n%s", oj)
	}
	three := sampleReport()
	three.Partitions = 3
	if md := three.Markdown(); !strings.Contains(md, "- Partitions: 3 per cluster (`--partitions 3`)") || !strings.Contains(md, "surviving node names its new leader") {
		t.Fatalf("matrix.md does not name the partitions:\n%s", md)
	}
	b, err := three.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var got struct{ Partitions int }
	if err := json.Unmarshal(b, &got); err != nil || got.Partitions != 3 {
		t.Fatalf("matrix.json partitions %d, %v", got.Partitions, err)
	}
}
