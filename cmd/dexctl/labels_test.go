package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

func TestSessionStartSendsItsLabels(t *testing.T) {
	f := &fakeSessions{}
	addr := startFake(t, f)
	if _, err := run(t, "--addr", addr, "session", "start", "--id", "s1", "--label", "team=red", "--label", "env="); err != nil {
		t.Fatal(err)
	}
	if len(f.created) != 1 || labelText(f.created[0].Labels) != "team=red,env=" {
		t.Fatalf("created %v", f.created)
	}
	for _, bad := range []string{"team", "=red"} {
		if _, err := run(t, "--addr", addr, "session", "start", "--label", bad); err == nil || !isUsage(err) || !strings.Contains(err.Error(), "KEY=VALUE") {
			t.Errorf("--label %q: %v; want a usage error", bad, err)
		}
	}
	if len(f.created) != 1 {
		t.Fatalf("a refused start created a session: %v", f.created)
	}
}

func labelText(ls []*dexv1.Label) string {
	var parts []string
	for _, l := range ls {
		parts = append(parts, l.Key+"="+l.Value)
	}
	return strings.Join(parts, ",")
}

func TestSessionLabelSetsAndRemoves(t *testing.T) {
	f := &fakeSessions{}
	addr := startFake(t, f)
	out, err := run(t, "--addr", addr, "session", "label", "s1", "team=blue", "tier=1", "--remove", "env", "--remove", "old")
	if err != nil {
		t.Fatal(err)
	}
	if out != "s1 labels: team=blue,tier=1\n" {
		t.Fatalf("printed %q", out)
	}
	if len(f.labels) != 1 || labelText(f.labels[0].Set) != "team=blue,tier=1" || strings.Join(f.labels[0].Remove, ",") != "env,old" {
		t.Fatalf("sent %v", f.labels)
	}
	if _, err := run(t, "--addr", addr, "session", "label", "s1"); err == nil || !isUsage(err) {
		t.Errorf("nothing to change: %v; want a usage error", err)
	}
	if _, err := run(t, "--addr", addr, "session", "label", "s1", "novalue"); err == nil || !isUsage(err) {
		t.Errorf("a label without =: %v; want a usage error", err)
	}
	if _, err := run(t, "--addr", addr, "session", "label", "nobody", "k=v"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("an unknown session: %v", err)
	}
	if len(f.labels) != 1 {
		t.Fatalf("refused commands sent %v", f.labels)
	}
}

func TestSessionShowAndListPrintLabels(t *testing.T) {
	f := &fakeSessions{pageSize: 10, all: []*dexv1.SessionSummary{
		{Id: "s1", Status: dexv1.SessionStatus_SESSION_STATUS_IDLE, Labels: []*dexv1.Label{{Key: "env", Value: "prod"}, {Key: "team", Value: "red"}}},
		{Id: "s2", Status: dexv1.SessionStatus_SESSION_STATUS_IDLE},
	}}
	addr := startFake(t, f)
	out, err := run(t, "--addr", addr, "session", "show", "s1")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "\nlabels: env=prod,team=red\n") {
		t.Fatalf("show printed:\n%s", out)
	}
	out, err = run(t, "--addr", addr, "session", "list")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if !slices.Contains(strings.Fields(lines[0]), "LABELS") || !strings.Contains(out, "env=prod,team=red") {
		t.Fatalf("list printed:\n%s", out)
	}
}

func TestSessionListSendsItsFiltersToTheCluster(t *testing.T) {
	f := &fakeSessions{pageSize: 10}
	addr := startFake(t, f)
	before := time.Now()
	if _, err := run(t, "--addr", addr, "session", "list", "--json", "--label", "team=red", "--label", "env=prod",
		"--agent", "coder", "--status", "running", "--parent", "p1", "--since", "1h", "--until", "2099-01-01T00:00:00Z", "--order", "updated"); err != nil {
		t.Fatal(err)
	}
	if len(f.lists) != 1 {
		t.Fatalf("%d list calls", len(f.lists))
	}
	r := f.lists[0]
	since := before.Add(-time.Hour).UnixMilli()
	if labelText(r.Labels) != "team=red,env=prod" || r.Agent != "coder" || r.Status != dexv1.SessionStatus_SESSION_STATUS_RUNNING ||
		r.ParentId != "p1" || r.OrderBy != dexv1.SessionOrder_SESSION_ORDER_UPDATED || !r.Descending ||
		r.UpdatedAfterMs < since-1000 || r.UpdatedAfterMs > since+60_000 || r.UpdatedBeforeMs != time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli() ||
		r.CreatedAfterMs != 0 || r.CreatedBeforeMs != 0 {
		t.Fatalf("request %v", r)
	}
	// Without a filter the cluster pages by id, as before.
	if _, err := run(t, "--addr", addr, "session", "list", "--json"); err != nil {
		t.Fatal(err)
	}
	if r := f.lists[1]; r.OrderBy != dexv1.SessionOrder_SESSION_ORDER_UNSPECIFIED || r.Descending {
		t.Fatalf("unfiltered request %v", r)
	}
	// --since alone bounds the creation time.
	if _, err := run(t, "--addr", addr, "session", "list", "--since", "30m"); err != nil {
		t.Fatal(err)
	}
	if r := f.lists[2]; r.CreatedAfterMs == 0 || r.OrderBy != dexv1.SessionOrder_SESSION_ORDER_CREATED {
		t.Fatalf("--since request %v", r)
	}
	for _, bad := range [][]string{
		{"--order", "sideways"},
		{"--since", "yesterday"},
		{"--since", "-1h"},
		{"--since", "1h", "--until", "2h"},
		{"--label", "nokey"},
		{"--status", "deleted"},
	} {
		if _, err := run(t, append([]string{"--addr", addr, "session", "list"}, bad...)...); err == nil || !isUsage(err) {
			t.Errorf("session list %v: %v; want a usage error", bad, err)
		}
	}
	if len(f.lists) != 3 {
		t.Fatalf("refused lists called the cluster: %d calls", len(f.lists))
	}
}
