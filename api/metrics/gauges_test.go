package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/lease/leasetest"
)

func TestGauges_SessionsByLifecycleState(t *testing.T) {
	c := leasetest.New(t)
	m := New(c.State)
	c.BumpEpoch()
	c.CreateSession("open", "")
	c.CreateSession("closing", "go") // its turn runs: closed when it ends
	c.CreateSession("closed", "")
	for _, id := range []string{"closing", "closed"} {
		c.Do(&fsmpb.Command{Body: &fsmpb.Command_CloseSession{CloseSession: &fsmpb.CloseSession{SessionId: id}}})
	}
	want := `
# HELP dex_session_lifecycle Sessions by lifecycle state: open, closing (closed while a turn runs), closed (kept until its retention passes), deleted (rows being purged). Counted in the same walk as dex_sessions, at most once per 15 s.
# TYPE dex_session_lifecycle gauge
dex_session_lifecycle{state="closed"} 1
dex_session_lifecycle{state="closing"} 1
dex_session_lifecycle{state="deleted"} 0
dex_session_lifecycle{state="open"} 1
`
	if err := testutil.CollectAndCompare(m.gauges, strings.NewReader(want), "dex_session_lifecycle"); err != nil {
		t.Fatal(err)
	}
	if got := testutil.CollectAndCount(m.gauges, "dex_sessions"); got != len(fsmpb.SessionStatus_name)-1 {
		t.Fatalf("%d dex_sessions series; want one per status", got)
	}
}
