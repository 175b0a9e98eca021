package harness

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A node that answers /readyz/leader 200 needs no check; one that does not
// must have been marked down in haproxy's log before a Worker may connect.
func TestHAProxyWaitsForItsChecksToMarkFollowersDown(t *testing.T) {
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz/leader" {
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer leader.Close()
	follower := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer follower.Close()
	nodes := []*Node{
		{ID: "n1", HTTPAddr: strings.TrimPrefix(follower.URL, "http://")},
		{ID: "n2", HTTPAddr: strings.TrimPrefix(leader.URL, "http://")},
	}
	h := &HAProxy{Proc: Proc{LogPath: filepath.Join(t.TempDir(), "haproxy.log")}}
	if err := os.WriteFile(h.LogPath, []byte("[WARNING] Server dex_leader/n2 is DOWN\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := h.waitChecked(ctx, nodes)
	if err == nil || !strings.Contains(err.Error(), "have not marked n1 down") {
		t.Fatalf("with n1 a follower still in rotation: %v; want an error naming n1", err)
	}

	if err := os.WriteFile(h.LogPath, []byte("Server dex_leader/n1 is DOWN, reason: Layer7 wrong status, code: 503\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := h.waitChecked(context.Background(), nodes); err != nil {
		t.Fatalf("with the follower marked down and the leader ready: %v", err)
	}
}
