package soak

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/wirerules"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// On several partitions each leader fault names the partition whose leader
// it strikes, drawn from the seed so that every partition is struck; the
// rest of the schedule is the one a cluster of one partition gets.
func TestScheduleDrawsTheLeadersPartition(t *testing.T) {
	kinds := append(append([]string(nil), NodeFaults...), NetFaults...)
	one := NewSchedule(7, kinds).First(400)
	if !slices.Equal(one, NewSchedule(7, kinds).OverPartitions(1).First(400)) {
		t.Fatal("one partition changed the schedule")
	}
	three := NewSchedule(7, kinds).OverPartitions(3).First(400)
	if !slices.Equal(three, NewSchedule(7, kinds).OverPartitions(3).First(400)) {
		t.Fatal("the same seed drew two schedules")
	}
	struck := map[int]int{}
	for i, f := range three {
		leader := slices.Contains(leaderFaults, f.Kind)
		switch {
		case f.Partition < 0 || f.Partition >= 3:
			t.Fatalf("fault %d names partition %d of 3", f.N, f.Partition)
		case !leader && f.Partition != 0:
			t.Fatalf("fault %d (%s) strikes no leader but names partition %d", f.N, f.Kind, f.Partition)
		case leader:
			struck[f.Partition]++
		}
		f.Partition = 0
		if f != one[i] {
			t.Fatalf("fault %d is %+v on 3 partitions, %+v on one: only the partition may differ", f.N, f, one[i])
		}
	}
	for k := range 3 {
		if struck[k] < 20 {
			t.Fatalf("leader faults by partition %v: partition %d is (almost) never struck", struck, k)
		}
	}
}

func registration(tools ...*fsmpb.ToolSpec) *fsmpb.WorkerInfo {
	return &fsmpb.WorkerInfo{Id: "w", Tools: tools, RunsModel: true, RegisteredAtMs: 1}
}

var (
	lookup    = &fsmpb.ToolSpec{Name: "lookup", Access: fsmpb.ToolAccess_TOOL_ACCESS_READ}
	sendEmail = &fsmpb.ToolSpec{Name: "send_email", Access: fsmpb.ToolAccess_TOOL_ACCESS_SINGLE_ATTEMPT}
)

// catalogs is n partitions' catalogs, each holding lookup and send_email
// served by Workers w1 and w2.
func catalogs(n int) []catalog {
	var out []catalog
	for range n {
		w := registrationText(registration(lookup, sendEmail))
		out = append(out, catalog{
			tools:   map[string]string{"lookup": fsm.PolicyText(lookup), "send_email": fsm.PolicyText(sendEmail)},
			workers: map[string]string{"w1": w, "w2": w},
		})
	}
	return out
}

func TestCatalogDiffs(t *testing.T) {
	never := func(string) bool { return false }
	always := func(string) bool { return true }
	if d := catalogDiffs(catalogs(3), never); d != "" {
		t.Fatalf("the same catalogs differ: %s", d)
	}
	for _, c := range []struct {
		name   string
		change func(cats []catalog)
		mayLag func(string) bool
		want   string // "" : no difference
	}{
		{"another policy", func(cats []catalog) { cats[1].tools["lookup"] = "single_attempt" }, always, `tool lookup: partitions 0 and 2 "read with 3 attempts", partition 1 "single_attempt"`},
		{"a tool missing", func(cats []catalog) { delete(cats[2].tools, "send_email") }, always, "tool send_email: missing from partition 2"},
		{"a running Worker missing", func(cats []catalog) { delete(cats[0].workers, "w2") }, never, "Worker w2: missing from partition 0"},
		{"a dead Worker not yet dropped everywhere", func(cats []catalog) { delete(cats[0].workers, "w2") }, always, ""},
		{"a Worker registered differently", func(cats []catalog) { cats[2].workers["w1"] = registrationText(registration(lookup)) }, always, "Worker w1: partitions 0 and 1"},
	} {
		cats := catalogs(3)
		c.change(cats)
		d := catalogDiffs(cats, c.mayLag)
		if c.want == "" && d != "" || c.want != "" && !strings.Contains(d, c.want) {
			t.Errorf("%s: %q, want %q", c.name, d, c.want)
		}
	}
}

// A registration is compared by what it registers, not by when each
// partition applied it.
func TestRegistrationText(t *testing.T) {
	a, b := registration(lookup, sendEmail), registration(sendEmail, lookup)
	b.RegisteredAtMs = 99
	if registrationText(a) != registrationText(b) {
		t.Fatalf("%q != %q", registrationText(a), registrationText(b))
	}
	c := registration(lookup, &fsmpb.ToolSpec{Name: "send_email", Access: fsmpb.ToolAccess_TOOL_ACCESS_READ})
	if registrationText(a) == registrationText(c) {
		t.Fatal("two policies of send_email read the same")
	}
}

// catalogOf reads what a partition's state machine holds.
func TestCatalogOfAState(t *testing.T) {
	f := fsm.New(fsm.Options{})
	data, err := fsm.Encode(&fsmpb.Command{NowMs: 1, Body: &fsmpb.Command_RegisterWorker{RegisterWorker: &fsmpb.RegisterWorker{
		WorkerId: "w1", Tools: []*fsmpb.ToolSpec{lookup, sendEmail}, RunsModel: true}}})
	if err != nil {
		t.Fatal(err)
	}
	if res := f.ApplyBatch([]fsm.Entry{{Index: 1, Data: data}}); res[0].Err != nil {
		t.Fatalf("register: %v", res[0].Err)
	}
	c := catalogOf(f.State())
	if len(c.tools) != 2 || c.tools["send_email"] != "single_attempt" || c.workers["w1"] != registrationText(registration(lookup, sendEmail)) {
		t.Fatalf("catalog %+v", c)
	}
}

// sessionIn is an id of partition k of n.
func sessionIn(k, n int) string {
	for i := 0; ; i++ {
		if id := "s" + strings.Repeat("x", i); wirerules.PartitionOf(id, n) == k {
			return id
		}
	}
}

// partitionedInput is cleanInput's session once in each of n partitions,
// with the node states, the restart and the backups of n partitions.
func partitionedInput(n int) CheckInput {
	base := cleanInput()
	in := base
	in.Partitions, in.Digests, in.DigestIndex = n, nil, 0
	in.Ops, in.Ledger, in.Final = nil, nil, map[string]*dexv1.GetSessionResponse{}
	in.Restart = cleanRestart()
	for k := range n {
		id := sessionIn(k, n)
		for _, op := range base.Ops {
			op.Session, op.Call, op.Return = id, op.Call+int64(100*k), op.Return+int64(100*k)
			in.Ops = append(in.Ops, op)
		}
		for _, e := range base.Ledger {
			e.Session, e.Step = id, id+"-"+e.Step
			in.Ledger = append(in.Ledger, e)
		}
		final := proto.Clone(base.Final["s1"]).(*dexv1.GetSessionResponse)
		final.Session.Id, final.Session.TurnsCompleted = id, uint64(k+1)
		for _, st := range final.Steps {
			st.SessionId, st.Id = id, id+"-"+st.Id
		}
		in.Final[id] = final
		in.PartitionDigests = append(in.PartitionDigests, DigestSet{Index: uint64(40 + k), Digests: map[string]string{"n1": "aa", "n2": "aa", "n3": "aa"}})
	}
	for i := range in.Restart.Nodes {
		r := &in.Restart.Nodes[i]
		for k := range n {
			r.Partitions = append(r.Partitions, PartitionRestart{Partition: k, Snapshots: slices.Clone(r.Snapshots), Index: uint64(42 + k)})
		}
		r.Snapshots = nil
	}
	for i := range in.Backups {
		in.Backups[i].Catalogs = n
	}
	return in
}

func TestCheckOnPartitionsCountsEachPartition(t *testing.T) {
	res := Check(partitionedInput(3))
	if len(res.Violations) > 0 || res.Linearizable != "Ok" {
		t.Fatalf("a consistent run is reported: %+v (linearizable %s)", res.Violations, res.Linearizable)
	}
	c := res.Checked
	if c.AckedWrites != 6 || c.Calls != 3 || c.Sessions != 3 || c.Nodes != 3 || c.Restarted != 3 || c.Snapshots != 18 || c.Backups != 2 || c.Catalogs != 2 {
		t.Fatalf("checked %+v", c)
	}
	if len(res.Partitions) != 3 {
		t.Fatalf("partitions %+v, want 3", res.Partitions)
	}
	for k, p := range res.Partitions {
		want := PartitionCheck{Partition: k, Sessions: 1, Turns: k + 1, AckedWrites: 2, Calls: 1, LedgerLines: 1, HistoryOps: 5, DigestIndex: uint64(40 + k), Snapshots: 6}
		if p != want {
			t.Errorf("partition %d: %+v, want %+v", k, p, want)
		}
	}
}

// Each violation counts in its partition: a session's in the session's,
// a node state's, snapshot's or catch-up's in the one it is of; the
// catalog's in none.
func TestCheckOnPartitionsNamesTheViolationsPartition(t *testing.T) {
	in := partitionedInput(3)
	in.Ledger = append(in.Ledger, in.Ledger[2])                                                // partition 2's single-attempt tool ran twice
	in.PartitionDigests[1].Digests["n3"] = "bb"                                                // partition 1's states differ
	in.Restart.Nodes[1].Partitions[0].Snapshots[0].Err = "record 15: too large"                // a snapshot of partition 0 does not restore
	in.Restart.Nodes[2].Partitions[2].Err = "applied index 3 after 2m0s, the soak ended at 44" // n3 did not catch up in partition 2
	in.Backups[1].Catalog = "Worker w1-2: missing from partition 1"
	res := Check(in)
	byPartition := map[string][]string{}
	for _, v := range res.Violations {
		where := "none"
		if v.Partition != nil {
			where = strconv.Itoa(*v.Partition)
			if !strings.HasPrefix(v.Detail, "partition "+where) && v.Session == "" {
				t.Errorf("%s violation of partition %s does not name it: %s", v.Kind, where, v.Detail)
			}
		}
		byPartition[where] = append(byPartition[where], v.Kind)
	}
	want := map[string][]string{"0": {VRestart}, "1": {VDiverged}, "2": {VSingleAttempt, VDoubleExec, VRestart}, "none": {VCatalog}}
	for where, kinds := range want {
		got := slices.Clone(byPartition[where])
		slices.Sort(got)
		slices.Sort(kinds)
		if !slices.Equal(got, kinds) {
			t.Errorf("violations in partition %s: %v, want %v (all: %+v)", where, got, kinds, res.Violations)
		}
	}
	for k, n := range []int{1, 1, 3} {
		if res.Partitions[k].Violations != n {
			t.Errorf("partition %d counts %d violations, want %d", k, res.Partitions[k].Violations, n)
		}
	}
	if res.Checked.Restarted != 2 || res.Checked.Catalogs != 1 {
		t.Fatalf("checked %+v", res.Checked)
	}
}

// With one partition no violation names one, and nothing is counted by
// partition: the checker's result is what it always was.
func TestCheckOfOnePartitionNamesNone(t *testing.T) {
	in := cleanInput()
	in.Ledger = append(in.Ledger, in.Ledger[0])
	res := Check(in)
	if len(res.Violations) == 0 || res.Partitions != nil {
		t.Fatalf("violations %+v, partitions %+v", res.Violations, res.Partitions)
	}
	for _, v := range res.Violations {
		if v.Partition != nil {
			t.Fatalf("%+v names a partition", v)
		}
	}
}

func partitionedReport() *Report {
	in := partitionedInput(3)
	in.Backups[0].Partitions = []BackupPart{{Index: 30}, {Index: 31}, {Index: 32}}
	return &Report{Seed: 1, Duration: 3 * time.Minute, Partitions: 3, Check: Check(in), Restart: in.Restart, Backups: in.Backups,
		FaultLog: []FaultRecord{{Fault: Fault{Kind: FKillLeader, Partition: 2}}, {Fault: Fault{Kind: FPauseFollower, Partition: 2}}, {Fault: Fault{Kind: FKillNode}}}}
}

func TestReportOfPartitions(t *testing.T) {
	rep := partitionedReport()
	sum := rep.Summary()
	for _, want := range []string{
		"partition 0: 1 sessions, 1 turns, 2 acknowledged writes, 1 calls, 1 ledger lines, 0 leader faults, 0 violations\n",
		"partition 2: 1 sessions, 3 turns, 2 acknowledged writes, 1 calls, 1 ledger lines, 2 leader faults, 0 violations\n",
		"across partitions: the same tool catalog and Worker registrations in every partition of 2 of 2 backups; 0 violations in no one partition\n",
	} {
		if !strings.Contains(sum, want) {
			t.Errorf("the summary lacks %q:\n%s", want, sum)
		}
	}
	md := rep.Markdown()
	for _, want := range []string{
		"--seed 1 --partitions 3`",
		"### Partitions",
		"| 2 | 2 | 1 | 3 | 2 | 1 | 1 | 42 | 6 | 0 |",
		"| 1 | 0s | p0 30, p1 31, p2 32 | 0 | 1 | inspected, restored, served, restarted, served; the same catalog and Worker registrations in its 3 partitions |",
		"p0: 40 (0 bytes): restores; 20 (0 bytes): restores; p1: 40",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
}

// A report of one partition says nothing of partitions.
func TestReportOfOnePartitionNamesNone(t *testing.T) {
	in := cleanInput()
	rep := &Report{Seed: 1, Duration: 3 * time.Minute, Check: Check(in), Restart: in.Restart, Backups: in.Backups,
		FaultLog: []FaultRecord{{Fault: Fault{Kind: FKillLeader}}}}
	for _, text := range []string{rep.Summary(), rep.Markdown()} {
		if strings.Contains(strings.ToLower(text), "partition") {
			t.Fatalf("a report of one partition names partitions:\n%s", text)
		}
	}
}
