package main

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// fakeReady is a node's readiness as the HTTP paths ask it.
type fakeReady struct {
	member, leader bool
	verify         error
}

func (f fakeReady) Ready() (bool, string) {
	if f.member {
		return true, ""
	}
	return false, "catching up: applied index 3, commit index 2000"
}

func (f fakeReady) LeaderReady() (bool, string) {
	if f.leader {
		return true, ""
	}
	return false, "not the leader (this node is a follower; the leader is n2)"
}

func (f fakeReady) VerifyLeader(time.Duration) error { return f.verify }

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	b, _ := io.ReadAll(rec.Body)
	return rec.Code, strings.TrimSpace(string(b))
}

// /readyz answers for every healthy member, /readyz/leader for the leader
// alone; either refuses, with the reason, when its check fails or a quorum
// does not confirm a leadership the node holds.
func TestReadyPaths(t *testing.T) {
	for _, c := range []struct {
		name                 string
		ready                fakeReady
		member, leader       int
		memberBody, leadBody string
	}{
		{"a follower that keeps up", fakeReady{member: true}, 200, 503, "ready", "not the leader (this node is a follower; the leader is n2)"},
		{"the leader", fakeReady{member: true, leader: true}, 200, 200, "ready", "ready"},
		{"a member catching up", fakeReady{}, 503, 503, "catching up: applied index 3, commit index 2000", "not the leader (this node is a follower; the leader is n2)"},
		{"a leader a quorum does not confirm", fakeReady{member: true, leader: true, verify: errors.New("no quorum")}, 503, 503,
			"cannot confirm the leadership with a quorum: no quorum", "cannot confirm the leadership with a quorum: no quorum"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := httpHandler(c.ready, nil)
			if code, body := get(t, h, "/readyz"); code != c.member || body != c.memberBody {
				t.Errorf("/readyz: %d %q; want %d %q", code, body, c.member, c.memberBody)
			}
			if code, body := get(t, h, "/readyz/leader"); code != c.leader || body != c.leadBody {
				t.Errorf("/readyz/leader: %d %q; want %d %q", code, body, c.leader, c.leadBody)
			}
		})
	}
}
