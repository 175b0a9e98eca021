package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestConsoleIsMountedUnderUIBesideTheNodeEndpoints(t *testing.T) {
	tag := func(name string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(name)) })
	}
	h := limitRequests(withConsole(tag("node"), tag("console")))
	for path, want := range map[string]string{"/ui/": "console", "/ui/sessions/s1": "console", "/healthz": "node", "/metrics": "node"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Body.String() != want {
			t.Errorf("GET %s served by %q; want %s", path, rec.Body.String(), want)
		}
	}
	// The console's forms post; only the node's read-only paths refuse it.
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/ui/sessions/s1/approve", nil))
	if rec.Code != http.StatusOK || rec.Body.String() != "console" {
		t.Fatalf("POST to the console: %d %q", rec.Code, rec.Body.String())
	}
}

func TestFollowConnDialsAgainWhenTheMembersChange(t *testing.T) {
	members := []string{"127.0.0.1:7102", "127.0.0.1:7101"}
	f := &followConn{self: "127.0.0.1:7101", members: func() []string { return members }}
	defer f.close()
	a, err := f.current()
	if err != nil {
		t.Fatal(err)
	}
	if f.target != "dex:///127.0.0.1:7101,127.0.0.1:7102" {
		t.Fatalf("target %q; want every member once, self included, sorted", f.target)
	}
	if b, _ := f.current(); b != a {
		t.Fatal("the same members dialed a new channel")
	}
	members = []string{"127.0.0.1:7102", "127.0.0.1:7103"}
	c, err := f.current()
	if err != nil || c == a || f.target != "dex:///127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103" {
		t.Fatalf("after a change: %v, target %q", err, f.target)
	}
}
