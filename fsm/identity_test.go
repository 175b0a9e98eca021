package fsm

import (
	"strings"
	"testing"

	"github.com/dexhq/dex/fsm/fsmpb"
)

func setClusterID(id string) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_SetClusterId{SetClusterId: &fsmpb.SetClusterId{ClusterId: id}}}
}

func TestClusterIDIsSetOnceAndSurvivesRestart(t *testing.T) {
	d := newDriver(t)
	if got := d.f.State().Meta().GetClusterId(); got != "" {
		t.Fatalf("a new state has cluster id %q", got)
	}
	d.do(setClusterID("c0ffee"))
	d.do(setClusterID("c0ffee")) // a retried proposal changes nothing
	r := d.refused(setClusterID("beef"), CodeFailedPrecondition)
	if !strings.Contains(r.Reason, "c0ffee") {
		t.Fatalf("refusal %q does not name the id in place", r.Reason)
	}
	d.refused(setClusterID(""), CodeInvalid)
	d.refused(setClusterID(strings.Repeat("a", 65)), CodeInvalid)
	d.restart()
	if got := d.f.State().Meta().GetClusterId(); got != "c0ffee" {
		t.Fatalf("after a snapshot restore the cluster id is %q, want c0ffee", got)
	}
}
