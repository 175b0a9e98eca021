package console

import (
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

var rowID = regexp.MustCompile(`<tr id="row-([^"]+)">`)

// rowIDs are the sessions a list page shows, in order.
func rowIDs(body string) []string {
	var out []string
	for _, m := range rowID.FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

// familyAPI holds a root session, its child, its fork and a new session of
// another agent and team.
func familyAPI(now time.Time) *fakeAPI {
	api := newFakeAPI()
	api.add(&dexv1.Session{Id: "ses-root", Status: dexv1.SessionStatus_SESSION_STATUS_IDLE, CreatedAtMs: 1000, UpdatedAtMs: 5000})
	api.add(&dexv1.Session{Id: "ses-child", ParentId: "ses-root", Status: dexv1.SessionStatus_SESSION_STATUS_IDLE, CreatedAtMs: 2000, UpdatedAtMs: 3000})
	api.add(&dexv1.Session{Id: "ses-fork", ForkedFrom: "ses-root", ForkedAtSeq: 2, Status: dexv1.SessionStatus_SESSION_STATUS_CLOSED, CreatedAtMs: 3000, UpdatedAtMs: 4000})
	at := now.Add(-10 * time.Minute).UnixMilli()
	api.add(&dexv1.Session{Id: "ses-new", Agent: "bot@2", Labels: []*dexv1.Label{{Key: "team", Value: "x"}}, Status: dexv1.SessionStatus_SESSION_STATUS_PAUSED,
		CreatedAtMs: at, UpdatedAtMs: at})
	return api
}

// Each filter and order reaches the API's request, and the page shows
// what the API answered: the console narrows nothing itself.
func TestSessionsList_EachFilterReachesTheRequest(t *testing.T) {
	now := time.Now()
	api := familyAPI(now)
	b := newBrowser(t, serveFake(t, api, Config{}))
	near := func(ms int64, want time.Time) bool {
		return ms > want.Add(-time.Minute).UnixMilli() && ms <= want.Add(time.Minute).UnixMilli()
	}
	for _, c := range []struct {
		query string
		rows  []string
		asked func(*dexv1.ListSessionsRequest) bool
	}{
		{"", []string{"ses-new", "ses-fork", "ses-child", "ses-root"}, func(r *dexv1.ListSessionsRequest) bool {
			return r.OrderBy == dexv1.SessionOrder_SESSION_ORDER_CREATED && r.Descending
		}},
		{"status=closed", []string{"ses-fork"}, func(r *dexv1.ListSessionsRequest) bool { return r.Status == dexv1.SessionStatus_SESSION_STATUS_CLOSED }},
		{"agent=bot%402", []string{"ses-new"}, func(r *dexv1.ListSessionsRequest) bool { return r.Agent == "bot@2" }},
		{"label=team%3Dx", []string{"ses-new"}, func(r *dexv1.ListSessionsRequest) bool {
			return len(r.Labels) == 1 && r.Labels[0].Key == "team" && r.Labels[0].Value == "x"
		}},
		{"parent=ses-root", []string{"ses-child"}, func(r *dexv1.ListSessionsRequest) bool { return r.ParentId == "ses-root" }},
		{"forked_from=ses-root", []string{"ses-fork"}, func(r *dexv1.ListSessionsRequest) bool { return r.ForkedFrom == "ses-root" }},
		{"created_since=1h", []string{"ses-new"}, func(r *dexv1.ListSessionsRequest) bool { return near(r.CreatedAfterMs, now.Add(-time.Hour)) }},
		{"created_before=1970-01-01T00:00:02.5Z", []string{"ses-child", "ses-root"}, func(r *dexv1.ListSessionsRequest) bool { return r.CreatedBeforeMs == 2500 }},
		{"updated_since=1970-01-01T00:00:04Z", []string{"ses-new", "ses-fork", "ses-root"}, func(r *dexv1.ListSessionsRequest) bool { return r.UpdatedAfterMs == 4000 }},
		{"updated_before=1970-01-02", []string{"ses-fork", "ses-child", "ses-root"}, func(r *dexv1.ListSessionsRequest) bool {
			return r.UpdatedBeforeMs == 24*time.Hour.Milliseconds()
		}},
		{"updated_before=30m", []string{"ses-fork", "ses-child", "ses-root"}, func(r *dexv1.ListSessionsRequest) bool {
			return near(r.UpdatedBeforeMs, now.Add(-30*time.Minute))
		}},
		{"order=updated", []string{"ses-new", "ses-root", "ses-fork", "ses-child"}, func(r *dexv1.ListSessionsRequest) bool {
			return r.OrderBy == dexv1.SessionOrder_SESSION_ORDER_UPDATED && r.Descending
		}},
		{"order=updated&dir=oldest", []string{"ses-child", "ses-fork", "ses-root", "ses-new"}, func(r *dexv1.ListSessionsRequest) bool {
			return r.OrderBy == dexv1.SessionOrder_SESSION_ORDER_UPDATED && !r.Descending
		}},
		{"dir=oldest", []string{"ses-root", "ses-child", "ses-fork", "ses-new"}, func(r *dexv1.ListSessionsRequest) bool {
			return r.OrderBy == dexv1.SessionOrder_SESSION_ORDER_CREATED && !r.Descending
		}},
	} {
		before := len(api.listRequests())
		body := wantStatus(t, b.get("/ui/sessions?"+c.query), http.StatusOK)
		if got := rowIDs(body); !slices.Equal(got, c.rows) {
			t.Errorf("%s: rows %v; want %v", c.query, got, c.rows)
		}
		reqs := api.listRequests()[before:]
		if len(reqs) == 0 {
			t.Fatalf("%s: no ListSessions call", c.query)
		}
		for _, r := range reqs {
			if !c.asked(r) {
				t.Errorf("%s: the request %v does not carry the filter", c.query, r)
			}
		}
	}
}

// The status links, the form and the next link keep the whole filter, the
// times as typed.
func TestSessionsList_LinksKeepTheFilter(t *testing.T) {
	now := time.Now()
	api := familyAPI(now)
	for i := range 60 {
		api.add(&dexv1.Session{Id: fmt.Sprintf("ses-kid-%02d", i), ParentId: "ses-root", Status: dexv1.SessionStatus_SESSION_STATUS_IDLE,
			CreatedAtMs: now.Add(-5 * time.Minute).UnixMilli(), UpdatedAtMs: now.Add(-time.Duration(i) * time.Second).UnixMilli()})
	}
	b := newBrowser(t, serveFake(t, api, Config{}))
	body := wantStatus(t, b.get("/ui/sessions?parent=ses-root&created_since=1h&order=updated&dir=oldest&status=idle"), http.StatusOK,
		`href="/ui/sessions?created_since=1h&amp;dir=oldest&amp;order=updated&amp;parent=ses-root&amp;status=waiting"`,
		`<input name="parent" value="ses-root"`, `<input name="created_since" value="1h"`, `<option value="updated" selected>`)
	if got := rowIDs(body); len(got) != sessionsPerPage || got[0] != "ses-kid-59" {
		t.Fatalf("rows %v; want a page of the children, the least recently updated first", got)
	}
	u, err := url.Parse(nextLink(t, body))
	if err != nil {
		t.Fatal(err)
	}
	v := u.Query()
	if v.Get("parent") != "ses-root" || v.Get("created_since") != "1h" || v.Get("order") != "updated" || v.Get("dir") != "oldest" || v.Get("status") != "idle" || v.Get("token") == "" {
		t.Fatalf("next link %q lost part of the filter", u)
	}
	if got := rowIDs(wantStatus(t, b.get(u.String()), http.StatusOK)); len(got) != 10 || got[9] != "ses-kid-00" {
		t.Fatalf("page 2 rows %v; want the last 10 children", got)
	}
}

// The bulk form acts on the whole filter: a time given as a duration goes
// as the instant the page listed by.
func TestBulk_TheFormCarriesEveryFilter(t *testing.T) {
	api := familyAPI(time.Now())
	b := newBrowser(t, serveFake(t, api, Config{}))
	body := wantStatus(t, b.get("/ui/sessions?parent=ses-root&forked_from=ses-x&created_since=1h&updated_before=2026-01-02"), http.StatusOK, `id="bulkform"`,
		`<input type="hidden" name="parent" value="ses-root">`, `<input type="hidden" name="forked_from" value="ses-x">`,
		`<input type="hidden" name="updated_before" value="2026-01-02T00:00:00.000Z">`)
	m := regexp.MustCompile(`<input type="hidden" name="created_since" value="([^"]+)">`).FindStringSubmatch(body)
	if m == nil {
		t.Fatal("the bulk form does not carry created_since")
	}
	form := url.Values{"parent": {"ses-root"}, "forked_from": {"ses-x"}, "created_since": {m[1]}, "updated_before": {"2026-01-02T00:00:00.000Z"}, "action": {"close"}}
	jobOf(t, b.post("/ui/bulk", form))
	since, _ := time.Parse(time.RFC3339, m[1])
	f := api.jobs[0].Filter
	if f.ParentId != "ses-root" || f.ForkedFrom != "ses-x" || f.CreatedFromMs != since.UnixMilli() || f.UpdatedToMs != time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC).UnixMilli() ||
		f.CreatedToMs != 0 || f.UpdatedFromMs != 0 {
		t.Fatalf("the job's filter %v is not the list's", f)
	}
	if w := api.writes(); len(w) != 1 || !strings.Contains(w[0], "filter={parent ses-root, forks of ses-x, created since "+html.UnescapeString(fmtMs(since.UnixMilli()))) {
		t.Fatalf("writes %q", w)
	}
}
