package store

import (
	"fmt"
	"slices"
	"testing"

	"github.com/dexhq/dex/fsm/fsmpb"
)

const (
	idle    = fsmpb.SessionStatus_SESSION_STATUS_IDLE
	running = fsmpb.SessionStatus_SESSION_STATUS_RUNNING
	deleted = fsmpb.SessionStatus_SESSION_STATUS_DELETED
)

func listSession(id string, created, updated int64, st fsmpb.SessionStatus, agent, parent string, labels ...string) *fsmpb.Session {
	s := &fsmpb.Session{Id: id, CreatedAtMs: created, UpdatedAtMs: updated, Status: st, Agent: agent, ParentId: parent}
	for i := 0; i+1 < len(labels); i += 2 {
		s.Labels = append(s.Labels, &fsmpb.Label{Key: labels[i], Value: labels[i+1]})
	}
	return s
}

func putAll(t *testing.T, db *DB, rows ...*fsmpb.Session) {
	t.Helper()
	tx := db.Txn(true)
	for _, r := range rows {
		tx.Put(TableSessions, r)
	}
	tx.Commit()
}

func ids(ss []*fsmpb.Session) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.Id
	}
	return out
}

// listAll reads every page of size n and returns the ids in order.
func listAll(t *testing.T, db *DB, f SessionFilter, order ListOrder, desc bool, n int) []string {
	t.Helper()
	var got []string
	var pos *ListPosition
	for range 1000 {
		page, next := db.Txn(false).ListSessions(f, order, desc, pos, n)
		if len(page) > n {
			t.Fatalf("a page of %d holds %d", n, len(page))
		}
		got = append(got, ids(page)...)
		if next == nil {
			return got
		}
		pos = next
	}
	t.Fatal("paging does not end")
	return nil
}

func listFixture(t *testing.T) *DB {
	db := New(Routing{})
	putAll(t, db,
		listSession("a", 10, 50, idle, "coder", "", "team", "red", "env", "prod"),
		listSession("b", 20, 40, running, "coder", "a", "team", "blue"),
		listSession("c", 30, 30, idle, "writer", "a", "team", "red"),
		listSession("d", 30, 60, idle, "writer", "", "env", "prod"),
		listSession("e", 50, 10, running, "coder", "", "team", "red", "env", "dev"),
		listSession("gone", 5, 5, deleted, "coder", "", "team", "red"),
		&fsmpb.Session{Id: "importing", CreatedAtMs: 1, Agent: "coder", Import: &fsmpb.SessionImport{}},
	)
	return db
}

func TestListSessions_FiltersEachPredicateInOrder(t *testing.T) {
	db := listFixture(t)
	red := []*fsmpb.Label{{Key: "team", Value: "red"}}
	cases := []struct {
		name  string
		f     SessionFilter
		order ListOrder
		desc  bool
		want  []string
	}{
		{"everything by created", SessionFilter{}, ListByCreated, false, []string{"a", "b", "c", "d", "e"}},
		{"everything by created, newest first", SessionFilter{}, ListByCreated, true, []string{"e", "d", "c", "b", "a"}},
		{"everything by updated", SessionFilter{}, ListByUpdated, false, []string{"e", "c", "b", "a", "d"}},
		{"status", SessionFilter{Status: running}, ListByCreated, false, []string{"b", "e"}},
		{"agent", SessionFilter{Agent: "writer"}, ListByCreated, false, []string{"c", "d"}},
		{"parent", SessionFilter{ParentID: "a"}, ListByCreated, false, []string{"b", "c"}},
		{"label", SessionFilter{Labels: red}, ListByCreated, false, []string{"a", "c", "e"}},
		{"two labels", SessionFilter{Labels: []*fsmpb.Label{{Key: "team", Value: "red"}, {Key: "env", Value: "prod"}}}, ListByCreated, false, []string{"a"}},
		{"label and status", SessionFilter{Labels: red, Status: idle}, ListByUpdated, false, []string{"c", "a"}},
		{"label and agent", SessionFilter{Labels: red, Agent: "coder"}, ListByCreated, true, []string{"e", "a"}},
		{"created range", SessionFilter{CreatedFrom: 20, CreatedTo: 50}, ListByCreated, false, []string{"b", "c", "d"}},
		{"created range, newest first", SessionFilter{CreatedFrom: 20, CreatedTo: 50}, ListByCreated, true, []string{"d", "c", "b"}},
		{"updated range by created", SessionFilter{UpdatedFrom: 30, UpdatedTo: 51}, ListByCreated, false, []string{"a", "b", "c"}},
		{"updated range by updated", SessionFilter{UpdatedFrom: 30}, ListByUpdated, true, []string{"d", "a", "b", "c"}},
		{"no match", SessionFilter{Agent: "nobody"}, ListByCreated, false, nil},
		{"label of a deleted session only", SessionFilter{Labels: red, CreatedTo: 10}, ListByCreated, false, nil},
	}
	for _, c := range cases {
		for _, n := range []int{1, 2, 100} {
			if got := listAll(t, db, c.f, c.order, c.desc, n); !slices.Equal(got, c.want) {
				t.Errorf("%s, pages of %d: got %v, want %v", c.name, n, got, c.want)
			}
		}
	}
}

func TestListSessions_HiddenAndPurgedSessionsLeaveTheIndexes(t *testing.T) {
	db := listFixture(t)
	every := func() []string {
		return listAll(t, db, SessionFilter{Labels: []*fsmpb.Label{{Key: "env", Value: "prod"}}}, ListByCreated, false, 10)
	}
	if got := every(); !slices.Equal(got, []string{"a", "d"}) {
		t.Fatalf("got %v", got)
	}
	// A tombstone is out of the list at once; a purged row leaves no key.
	putAll(t, db, listSession("d", 30, 70, deleted, "writer", "", "env", "prod"))
	if got := every(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("after delete: got %v", got)
	}
	tx := db.Txn(true)
	tx.Remove(TableSessions, &fsmpb.Session{Id: "a"})
	tx.Remove(TableSessions, &fsmpb.Session{Id: "d"})
	tx.Commit()
	if got := every(); len(got) != 0 {
		t.Fatalf("after purge: got %v", got)
	}
	for _, ix := range []string{IndexListCreated, IndexListUpdated} {
		it, err := db.Txn(false).mem().Get(TableSessions, ix)
		if err != nil {
			t.Fatal(err)
		}
		for raw := it.Next(); raw != nil; raw = it.Next() {
			if id := raw.(*fsmpb.Session).Id; id == "a" || id == "d" || id == "gone" || id == "importing" {
				t.Fatalf("%s still has a key of %s", ix, id)
			}
		}
	}
	// A label changed moves the session between label ranges.
	putAll(t, db, listSession("c", 30, 80, idle, "writer", "a", "team", "green"))
	if got := listAll(t, db, SessionFilter{Labels: []*fsmpb.Label{{Key: "team", Value: "red"}}}, ListByCreated, false, 10); !slices.Equal(got, []string{"e"}) {
		t.Fatalf("old label still finds c: %v", got)
	}
}

// Sessions added while a client pages (each created later than any
// before, as the leader's clock gives them) are read once, after the
// ones that were there: no duplicate, no gap.
func TestListSessions_PagingResumesExactlyWhileSessionsAreAdded(t *testing.T) {
	db := New(Routing{})
	next := 0
	add := func(n int) {
		var rows []*fsmpb.Session
		for range n {
			next++
			rows = append(rows, listSession(fmt.Sprintf("s%04d", 9999-next), int64(next/3), int64(next), idle, "coder", "", "team", "red"))
		}
		putAll(t, db, rows...)
	}
	add(20)
	f := SessionFilter{Labels: []*fsmpb.Label{{Key: "team", Value: "red"}}}
	var got []string
	var pos *ListPosition
	for {
		page, p := db.Txn(false).ListSessions(f, ListByCreated, false, pos, 7)
		got = append(got, ids(page)...)
		if p == nil {
			break
		}
		pos = p
		if next < 60 {
			add(5)
		}
	}
	if len(got) != next {
		t.Fatalf("read %d sessions of %d", len(got), next)
	}
	seen := map[string]bool{}
	for _, id := range got {
		if seen[id] {
			t.Fatalf("%s read twice", id)
		}
		seen[id] = true
	}
}

// A filter its driving index serves badly stops each page at MaxListScan
// entries, with a position, and the pages together still find everything.
func TestListSessions_ScanIsBoundedPerPage(t *testing.T) {
	db := New(Routing{})
	var rows []*fsmpb.Session
	n := MaxListScan*2 + 10
	for i := range n {
		st := idle
		if i == n-1 || i == 3 {
			st = running
		}
		rows = append(rows, listSession(fmt.Sprintf("s%06d", i), int64(i), int64(i), st, "coder", "", "team", "red"))
	}
	putAll(t, db, rows...)
	// The label drives; the status is checked per row.
	f := SessionFilter{Labels: []*fsmpb.Label{{Key: "team", Value: "red"}}, Status: running}
	var got []string
	var pos *ListPosition
	pages := 0
	for {
		page, p := db.Txn(false).ListSessions(f, ListByCreated, false, pos, 50)
		pages++
		got = append(got, ids(page)...)
		if p == nil {
			break
		}
		pos = p
	}
	if want := []string{"s000003", fmt.Sprintf("s%06d", n-1)}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if pages != 3 {
		t.Fatalf("%d pages over %d entries, want 3 (%d a page at most)", pages, n, MaxListScan)
	}
}

func TestListIndexArguments(t *testing.T) {
	x := listIndexer{}
	if _, err := x.FromArgs(); err == nil {
		t.Fatal("no argument accepted")
	}
	if _, err := x.FromArgs("key"); err == nil {
		t.Fatal("a string accepted as a key")
	}
	if _, _, err := x.FromObject(&fsmpb.Step{}); err == nil {
		t.Fatal("a Step indexed as a session")
	}
}
