package fsm

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/fsm/store"
)

func lbl(kv ...string) []*fsmpb.Label {
	var out []*fsmpb.Label
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, &fsmpb.Label{Key: kv[i], Value: kv[i+1]})
	}
	return out
}

func setLabelsCmd(id string, set []*fsmpb.Label, remove ...string) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_SetLabels{SetLabels: &fsmpb.SetLabels{SessionId: id, Set: set, Remove: remove}}}
}

func createLabelled(id string, labels []*fsmpb.Label) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{SessionId: id, Labels: labels}}}
}

func labelText(s *fsmpb.Session) string { return labelsText(s.GetLabels()) }

// listed is the ids ListSessions finds with one label, by creation time.
func listed(d *driver, key, value string) []string {
	page, _ := d.f.State().ListSessions(store.SessionFilter{Labels: lbl(key, value)}, store.ListByCreated, false, nil, 100)
	var out []string
	for _, s := range page {
		out = append(out, s.Id)
	}
	return out
}

func TestLabels_SetAtCreationSortedAndChangedLater(t *testing.T) {
	d := newDriver(t)
	d.do(createLabelled("s", lbl("team", "red", "env", "prod")))
	if got := labelText(d.session("s")); got != "env=prod,team=red" {
		t.Fatalf("labels at creation: %q", got)
	}
	d.advance(1000)
	d.do(setLabelsCmd("s", lbl("team", "blue", "owner", "ana"), "env"))
	if got := labelText(d.session("s")); got != "owner=ana,team=blue" {
		t.Fatalf("labels after a change: %q", got)
	}
	if got := listed(d, "team", "red"); len(got) != 0 {
		t.Fatalf("the old label still finds %v", got)
	}
	if got := listed(d, "team", "blue"); !slices.Equal(got, []string{"s"}) {
		t.Fatalf("the new label finds %v", got)
	}
	// Removing a key the session lacks is no error; removing every label
	// leaves none.
	d.do(setLabelsCmd("s", nil, "owner", "team", "absent"))
	if got := d.session("s").Labels; len(got) != 0 {
		t.Fatalf("labels left: %v", got)
	}
}

func TestLabels_BadInputIsRefusedAndChangesNothing(t *testing.T) {
	d := newDriver(t)
	d.do(createLabelled("s", lbl("team", "red")))
	many := func(n int) []*fsmpb.Label {
		var out []*fsmpb.Label
		for i := range n {
			out = append(out, &fsmpb.Label{Key: fmt.Sprintf("k%02d", i), Value: "v"})
		}
		return out
	}
	for name, cmd := range map[string]*fsmpb.Command{
		"empty key":             setLabelsCmd("s", lbl("", "v")),
		"upper-case key":        setLabelsCmd("s", lbl("Team", "v")),
		"key with a space":      setLabelsCmd("s", lbl("a b", "v")),
		"key starting with dot": setLabelsCmd("s", lbl(".hidden", "v")),
		"key too long":          setLabelsCmd("s", lbl(strings.Repeat("k", MaxLabelKeyBytes+1), "v")),
		"value too long":        setLabelsCmd("s", lbl("k", strings.Repeat("v", MaxLabelValueBytes+1))),
		"value with a newline":  setLabelsCmd("s", lbl("k", "a\nb")),
		"key given twice":       setLabelsCmd("s", lbl("k", "1", "k", "2")),
		"set and removed":       setLabelsCmd("s", lbl("k", "1"), "k"),
		"bad key removed":       setLabelsCmd("s", nil, "BAD"),
		"nothing to change":     setLabelsCmd("s", nil),
		"too many at once":      setLabelsCmd("s", many(MaxLabels+1)),
		"too many in all":       setLabelsCmd("s", many(MaxLabels)),
		"too many at creation":  createLabelled("t", many(MaxLabels+1)),
		"bad label at creation": createLabelled("t", lbl("ok", "v", "NO", "v")),
	} {
		t.Run(name, func(t *testing.T) {
			d.t = t
			d.refused(cmd, CodeInvalid)
		})
	}
	d.t = t
	// A command cannot carry a string that is not UTF-8; the check refuses
	// one anyway.
	if r := CheckLabelValue("k", "\xff"); r == nil || r.Code != CodeInvalid {
		t.Fatalf("a value not UTF-8: %v", r)
	}
	d.refused(setLabelsCmd("nobody", lbl("k", "v")), CodeNotFound)
	// The bound itself is allowed.
	d.do(setLabelsCmd("s", many(MaxLabels-1)))
	if n := len(d.session("s").Labels); n != MaxLabels {
		t.Fatalf("%d labels, want %d", n, MaxLabels)
	}
}

func TestLabels_SurviveASnapshotWithTheirIndexes(t *testing.T) {
	d := newDriver(t)
	d.do(createLabelled("a", lbl("team", "red")))
	d.advance(1000)
	d.do(createLabelled("b", lbl("team", "red", "env", "dev")))
	d.restart()
	if got := labelText(d.session("b")); got != "env=dev,team=red" {
		t.Fatalf("labels after a restore: %q", got)
	}
	if got := listed(d, "team", "red"); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("the restored index finds %v", got)
	}
}

func TestLabels_ADeletedSessionLeavesTheIndexes(t *testing.T) {
	d := newDriver(t)
	d.do(createLabelled("a", lbl("team", "red")))
	d.do(createLabelled("b", lbl("team", "red")))
	d.do(&fsmpb.Command{Body: &fsmpb.Command_DeleteSession{DeleteSession: &fsmpb.DeleteSession{SessionId: "a"}}})
	if got := listed(d, "team", "red"); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("after delete: %v", got)
	}
	d.refused(setLabelsCmd("a", lbl("k", "v")), CodeNotFound)
	for range 10 {
		if d.f.State().tx.Session("a") == nil {
			break
		}
		d.do(d.purgeCmd("a", 100))
	}
	if d.f.State().tx.Session("a") != nil {
		t.Fatal("the session was not purged")
	}
	if got := listed(d, "team", "red"); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("after purge: %v", got)
	}
}

func TestLabels_AnImportedHeaderKeepsTheLabelRules(t *testing.T) {
	header := func(labels []*fsmpb.Label) *fsmpb.ImportSessionBegin {
		return &fsmpb.ImportSessionBegin{Session: &fsmpb.Session{Id: "imp", Status: fsmpb.SessionStatus_SESSION_STATUS_IDLE, Labels: labels}}
	}
	if r := checkImportBegin(header(lbl("env", "prod", "team", "red"))); r != nil {
		t.Fatalf("sorted good labels refused: %v", r)
	}
	for name, labels := range map[string][]*fsmpb.Label{
		"bad key":  lbl("Env", "prod"),
		"unsorted": lbl("team", "red", "env", "prod"),
		"twice":    lbl("env", "a", "env", "b"),
	} {
		if r := checkImportBegin(header(labels)); r == nil || r.Code != CodeInvalid {
			t.Errorf("%s: %v; want invalid", name, r)
		}
	}
}
