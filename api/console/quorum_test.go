package console

import (
	"net/http"
	"strings"
	"testing"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// With too few voters answering, a page says so in one plain sentence, not
// with the channel's health-check error.
func TestAPageSaysWhenQuorumIsLost(t *testing.T) {
	api := newFakeAPI()
	api.down = "connection error: pickfirst: health check failure: NOT_SERVING"
	api.status = &dexv1.StatusResponse{AnsweredBy: "n1", Nodes: []*dexv1.NodeStatus{
		{Id: "n1", State: "candidate", Suffrage: "voter"},
		{Id: "n2", State: "unreachable", Suffrage: "voter"},
		{Id: "n3", State: "unreachable", Suffrage: "voter"},
	}}
	c := serveFake(t, api, Config{Timeout: time.Second})
	body := wantStatus(t, newBrowser(t, c).get("/ui/sessions"), http.StatusServiceUnavailable,
		"1 of 3 voters reachable: no quorum (n2, n3 not answering)")
	if strings.Contains(body, "pickfirst") || strings.Contains(body, "NOT_SERVING") {
		t.Fatalf("the page shows the channel's error:\n%s", body)
	}
}

// A majority answering without a leader is a takeover: the page says
// where this node sees the leader, as before.
func TestAPageSaysWhereTheLeaderIsWhenAMajorityAnswers(t *testing.T) {
	api := newFakeAPI()
	api.down = "node n2 is not the leader"
	c := serveFake(t, api, Config{Timeout: time.Second})
	body := wantStatus(t, newBrowser(t, c).get("/ui/sessions"), http.StatusServiceUnavailable, "no node serving clients answered", "sees leader n1")
	if strings.Contains(body, "no quorum") {
		t.Fatalf("2 of 3 voters answer, yet the page says no quorum:\n%s", body)
	}
}

// Without quorum every page carries one banner that says so: the pages
// that read sessions fail under it, the Cluster page (this node's own
// Status) still shows the nodes.
func TestABannerSaysWhenTheClusterHasNoQuorum(t *testing.T) {
	api := newFakeAPI()
	api.down = "connection error: pickfirst: health check failure: NOT_SERVING"
	api.status = &dexv1.StatusResponse{AnsweredBy: "n1", Nodes: []*dexv1.NodeStatus{
		{Id: "n1", State: "candidate", Suffrage: "voter"},
		{Id: "n2", State: "unreachable", Suffrage: "voter"},
		{Id: "n3", State: "unreachable", Suffrage: "voter"},
	}}
	b := newBrowser(t, serveFake(t, api, Config{Timeout: time.Second}))
	banner := `<div class="banner" id="banner" role="alert"><b>The cluster has no quorum.</b> 1 of 3 voters reachable: no quorum (n2, n3 not answering)`
	wantStatus(t, b.get("/ui/sessions"), http.StatusServiceUnavailable, banner)
	wantStatus(t, b.get("/ui/cluster"), http.StatusOK, banner, "unreachable")

	// With a majority answering, no banner.
	ok := newBrowser(t, serveFake(t, sampleAPI(), Config{}))
	for _, p := range []string{"/ui/sessions", "/ui/cluster"} {
		if body := wantStatus(t, ok.get(p), http.StatusOK); strings.Contains(body, `id="banner"`) {
			t.Fatalf("%s shows the no-quorum banner with a quorum", p)
		}
	}
}
