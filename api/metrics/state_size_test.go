package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"

	"github.com/dexhq/dex/lease/leasetest"
)

type lastSnapshot struct {
	size  int64
	index uint64
}

func (s *lastSnapshot) LastSnapshot() (int64, uint64, bool) { return s.size, s.index, s.index > 0 }

// series reads a gauge vector's values by table.
func series(t *testing.T, m *Node, name string) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m.gauges)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, mt := range f.GetMetric() {
			out[label(mt, "table")] = mt.GetGauge().GetValue()
		}
	}
	return out
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// dex_state_bytes and dex_state_rows give every table's figures as the state
// keeps them; dex_snapshot_bytes appears once the node keeps a snapshot.
func TestGauges_StateBytesAndRowsByTable(t *testing.T) {
	c := leasetest.New(t)
	m := New(c.State)
	snap := &lastSnapshot{}
	m.UseSnapshots(snap)
	c.BumpEpoch()
	c.CreateSession("a", "hello")
	c.CreateSession("b", "")

	bytes, rows := series(t, m, "dex_state_bytes"), series(t, m, "dex_state_rows")
	st := c.State()
	if len(bytes) != len(st.TableSizes()) || len(rows) != len(bytes) {
		t.Fatalf("%d bytes and %d rows series; want one per table (%d)", len(bytes), len(rows), len(st.TableSizes()))
	}
	wantSessions := proto.Size(st.Session("a")) + proto.Size(st.Session("b"))
	if rows["sessions"] != 2 || bytes["sessions"] != float64(wantSessions) {
		t.Fatalf("sessions: %v rows, %v bytes; want 2 rows of %d bytes", rows["sessions"], bytes["sessions"], wantSessions)
	}
	if rows["history"] != 1 || bytes["history"] == 0 {
		t.Fatalf("history: %v rows, %v bytes; want a's first message", rows["history"], bytes["history"])
	}
	if got := testutil.CollectAndCount(m.gauges, "dex_snapshot_bytes"); got != 0 {
		t.Fatalf("%d dex_snapshot_bytes series before any snapshot; want none", got)
	}

	snap.size, snap.index = 4321, 9
	want := `
# HELP dex_snapshot_bytes Size of the newest raft snapshot this node keeps on disk (absent until it has one).
# TYPE dex_snapshot_bytes gauge
dex_snapshot_bytes 4321
`
	if err := testutil.CollectAndCompare(m.gauges, strings.NewReader(want), "dex_snapshot_bytes"); err != nil {
		t.Fatal(err)
	}
}
