package console

import (
	"net/http"
	"strings"
	"testing"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// The cluster page shows the state's size and its tables that hold rows,
// the largest first.
func TestClusterPage_ShowsTheStateSizeByTable(t *testing.T) {
	api := sampleAPI()
	api.status = &dexv1.StatusResponse{Leader: "n1", AnsweredBy: "n2", Nodes: []*dexv1.NodeStatus{{Id: "n1", State: "leader"}},
		StateSize: &dexv1.StateSize{TotalRows: 1503, TotalBytes: 2_345_678, AppliedIndex: 812, LastSnapshotBytes: 2_100_000, LastSnapshotIndex: 800,
			Tables: []*dexv1.TableSize{
				{Table: "meta", Rows: 1, Bytes: 42},
				{Table: "steps", Rows: 1200, Bytes: 1_144_100},
				{Table: "history", Rows: 300, Bytes: 1_200_000},
				{Table: "tokens"},
			}}}
	b := newBrowser(t, serveFake(t, api, Config{}))
	body := wantStatus(t, b.get("/ui/cluster"), http.StatusOK,
		"<b>2.3 MB</b> in 1503 rows at applied index 812 · last snapshot 2.1 MB (entry 800) · as n2 holds it",
		"<tr><td>history</td><td>300</td><td>1.2 MB</td></tr>\n<tr><td>steps</td><td>1200</td><td>1.1 MB</td></tr>\n<tr><td>meta</td><td>1</td><td>42 B</td></tr>")
	if strings.Contains(body, "<td>tokens</td>") {
		t.Fatal("the cluster page lists a table without rows")
	}

	// A node that does not report the state's size: no State section.
	api.status.StateSize = nil
	if body := wantStatus(t, b.get("/ui/cluster"), http.StatusOK, "Leader <b>n1</b>"); strings.Contains(body, "state-size") {
		t.Fatal("the cluster page shows a state size no node reported")
	}
}
