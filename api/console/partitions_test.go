package console

import (
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/wirerules"
)

// partitionedStatus is a Status of three nodes and n partitions, as n2
// answers it: partition k is led by node n(k%3+1) at 127.0.0.1:710(k%3+1),
// except partition 2 (when there is one), which has no leader and a
// non-voter n4.
func partitionedStatus(n int) *dexv1.StatusResponse {
	st := &dexv1.StatusResponse{Leader: "n1", Term: 3, CommitIndex: 42, AppliedIndex: 42, Epoch: 7, AnsweredBy: "n2", Nodes: []*dexv1.NodeStatus{
		{Id: "n1", State: "leader", Term: 3, CommitIndex: 42, AppliedIndex: 42, Ready: true, Suffrage: "voter"},
		{Id: "n2", State: "follower", Term: 3, CommitIndex: 42, AppliedIndex: 42, Suffrage: "voter"},
		{Id: "n3", State: "follower", Term: 3, CommitIndex: 42, AppliedIndex: 42, Suffrage: "voter"},
	}}
	for k := range n {
		p := &dexv1.PartitionStatus{
			Id: uint32(k), Term: uint64(3 + k), CommitIndex: uint64(100 + k), AppliedIndex: uint64(90 + k), Epoch: uint64(7 + k),
			State: "follower", Voters: []string{"n1", "n2", "n3"},
		}
		if k == 2 {
			p.State, p.Nonvoters = "candidate", []string{"n4"}
		} else {
			leader := k%3 + 1
			p.Leader, p.LeaderGrpcAddress = fmt.Sprintf("n%d", leader), fmt.Sprintf("127.0.0.1:710%d", leader)
			if p.Leader == st.AnsweredBy {
				p.State = "leader"
			}
		}
		st.Partitions = append(st.Partitions, p)
	}
	return st
}

// partitionedAPI holds sessions in each of three partitions, with a child
// in its parent's partition, and answers Status with partitions of them.
func partitionedAPI(partitions int) (*fakeAPI, []string) {
	api := newFakeAPI()
	api.status = partitionedStatus(partitions)
	var ids []string
	for k := range 3 {
		for i := range 2 {
			id := wirerules.NewSessionIDIn(k, 3)
			api.add(&dexv1.Session{Id: id, Status: dexv1.SessionStatus_SESSION_STATUS_IDLE, CreatedAtMs: int64(1000 + 10*k + i)})
			ids = append(ids, id)
		}
	}
	parent := ids[len(ids)-1]
	child := wirerules.NewSessionIDIn(wirerules.PartitionOf(parent, 3), 3)
	api.add(&dexv1.Session{Id: child, ParentId: parent, Status: dexv1.SessionStatus_SESSION_STATUS_RUNNING, CreatedAtMs: 2000})
	return api, append(ids, child)
}

var sessionRow = regexp.MustCompile(`<tr id="row-[^"]+"><td><a href="/ui/sessions/([^"]+)">.*?</tr>`)
var partitionCell = regexp.MustCompile(`<td class="partition">(\d+)</td></tr>$`)

func TestClusterPage_ShowsNoPartitionsTableForOnePartition(t *testing.T) {
	api := newFakeAPI()
	api.status = partitionedStatus(1)
	body := wantStatus(t, newBrowser(t, serveFake(t, api, Config{})).get("/ui/cluster"), http.StatusOK, "Leader <b>n1</b>", `id="nodes"`)
	if strings.Contains(body, "Partitions") || strings.Contains(body, `id="partitions"`) {
		t.Fatalf("a cluster of one partition shows a Partitions table:\n%s", body)
	}
}

func TestClusterPage_ShowsARowPerPartition(t *testing.T) {
	api := newFakeAPI()
	api.status = partitionedStatus(3)
	body := wantStatus(t, newBrowser(t, serveFake(t, api, Config{})).get("/ui/cluster"), http.StatusOK,
		"<h2>Partitions</h2>", "<th>Role of n2</th>",
		`<tr id="partition-0"><td>0</td><td>n1 <span class="muted">127.0.0.1:7101</span></td><td><span class="role role-follower">follower</span></td>`+
			`<td>3</td><td>100</td><td>90</td><td>7</td><td>n1, n2, n3</td><td>—</td></tr>`,
		`<tr id="partition-1"><td>1</td><td>n2 <span class="muted">127.0.0.1:7102</span></td><td><span class="role role-leader">leader</span></td>`+
			`<td>4</td><td>101</td><td>91</td><td>8</td><td>n1, n2, n3</td><td>—</td></tr>`,
		`<tr id="partition-2"><td>2</td><td><span class="muted">none known</span></td><td><span class="role role-candidate">candidate</span></td>`+
			`<td>5</td><td>102</td><td>92</td><td>9</td><td>n1, n2, n3</td><td>n4</td></tr>`,
	)
	if n := strings.Count(body, `<tr id="partition-`); n != 3 {
		t.Fatalf("%d partition rows; want 3", n)
	}
}

func TestSessionsPage_ShowsNoPartitionColumnForOnePartition(t *testing.T) {
	api, ids := partitionedAPI(1)
	body := wantStatus(t, newBrowser(t, serveFake(t, api, Config{})).get("/ui/sessions"), http.StatusOK, ids...)
	if strings.Contains(body, "<th>Partition</th>") || strings.Contains(body, `class="partition"`) {
		t.Fatalf("a cluster of one partition shows a Partition column:\n%s", body)
	}
}

// Each row names the partition its session's id hashes to; a child's is
// its parent's. Status is asked once for the whole page, and not again
// once the count is known.
func TestSessionsPage_PartitionColumnFromTheIDs(t *testing.T) {
	api, ids := partitionedAPI(3)
	b := newBrowser(t, serveFake(t, api, Config{}))
	body := wantStatus(t, b.get("/ui/sessions"), http.StatusOK, "<th>Partition</th>")
	rows := sessionRow.FindAllStringSubmatch(body, -1)
	if len(rows) != len(ids) {
		t.Fatalf("%d session rows; want %d:\n%s", len(rows), len(ids), body)
	}
	seen := map[int]bool{}
	for _, row := range rows {
		m := partitionCell.FindStringSubmatch(row[0])
		if m == nil {
			t.Fatalf("row of %s has no partition cell: %s", row[1], row[0])
		}
		got, _ := strconv.Atoi(m[1])
		if want := wirerules.PartitionOf(row[1], 3); got != want {
			t.Fatalf("session %s shown in partition %d; it lives in %d", row[1], got, want)
		}
		seen[got] = true
	}
	if len(seen) != 3 {
		t.Fatalf("the rows name partitions %v; want all three", seen)
	}
	child, parent := ids[len(ids)-1], ids[len(ids)-2]
	if wirerules.PartitionOf(child, 3) != wirerules.PartitionOf(parent, 3) {
		t.Fatal("the sample child is not in its parent's partition")
	}
	if n := api.statusCount(); n != 1 {
		t.Fatalf("the page asked Status %d times; want once", n)
	}
	wantStatus(t, b.get("/ui/sessions?label=none%3Dhere"), http.StatusOK, `<td colspan="11" class="muted">No session matches.</td>`)
	wantStatus(t, b.get("/ui/sessions?q=no-such-session"), http.StatusNotFound, `<td class="partition">0</td>`)
	if n := api.statusCount(); n != 1 {
		t.Fatalf("Status asked %d times over three pages; the count is kept after the first", n)
	}
}

// A token that may not ask Status sees no partition, as with dexctl.
func TestSessionsPage_NoPartitionColumnWhenStatusIsRefused(t *testing.T) {
	api, ids := partitionedAPI(3)
	api.statusRefused = codes.PermissionDenied
	b := newBrowser(t, serveFake(t, api, Config{}))
	body := wantStatus(t, b.get("/ui/sessions"), http.StatusOK, ids...)
	if strings.Contains(body, "<th>Partition</th>") {
		t.Fatal("the page shows partitions it could not learn")
	}
	body = wantStatus(t, b.get("/ui/sessions/"+ids[0]), http.StatusOK, "<dt>Status</dt>")
	if strings.Contains(body, "<dt>Partition</dt>") {
		t.Fatal("the session page shows a partition it could not learn")
	}
}

func TestSessionPage_PartitionRowWithItsLeader(t *testing.T) {
	api, ids := partitionedAPI(3)
	b := newBrowser(t, serveFake(t, api, Config{}))
	for _, id := range ids {
		k := wirerules.PartitionOf(id, 3)
		leader := fmt.Sprintf("leader <b>n%d</b> at 127.0.0.1:710%d", k%3+1, k%3+1)
		if k == 2 {
			leader = `<span class="muted">no leader known</span>`
		}
		wantStatus(t, b.get("/ui/sessions/"+id), http.StatusOK,
			fmt.Sprintf(`<dt>Partition</dt><dd id="partition">%d of 3 · %s</dd>`, k, leader))
	}
	if n := api.statusCount(); n != len(ids) {
		t.Fatalf("%d Status calls for %d session pages; want one each (leaders change)", n, len(ids))
	}
}

// With one partition the row is left out, and once the count is known
// the session page asks no more Status.
func TestSessionPage_NoPartitionRowForOnePartition(t *testing.T) {
	api, ids := partitionedAPI(1)
	b := newBrowser(t, serveFake(t, api, Config{}))
	for _, id := range ids[:3] {
		body := wantStatus(t, b.get("/ui/sessions/"+id), http.StatusOK, "<dt>Status</dt>")
		if strings.Contains(body, "<dt>Partition</dt>") {
			t.Fatalf("a cluster of one partition shows a Partition row:\n%s", body)
		}
	}
	if n := api.statusCount(); n != 1 {
		t.Fatalf("%d Status calls for three session pages; want the first only", n)
	}
}
