package console

import (
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// bulkAPI is manageAPI with one more session of team=search in a turn.
func bulkAPI() *fakeAPI {
	api := manageAPI()
	api.add(&dexv1.Session{Id: "ses-search-busy", Agent: "bot@2", Status: dexv1.SessionStatus_SESSION_STATUS_WAITING, CreatedAtMs: 3000,
		Labels: []*dexv1.Label{{Key: "team", Value: "search"}}, Turn: &dexv1.Turn{Number: 1, FirstHistorySeq: 1}})
	return api
}

// jobOf is the job a start's redirect goes to.
func jobOf(t *testing.T, rec interface{ Result() *http.Response }) string {
	t.Helper()
	res := rec.Result()
	loc := res.Header.Get("Location")
	id, ok := strings.CutPrefix(loc, "/ui/bulk/")
	if res.StatusCode != http.StatusSeeOther || !ok || !strings.HasSuffix(id, "?done=started") {
		t.Fatalf("the start answered %d to %q; want 303 to a job's page", res.StatusCode, loc)
	}
	return strings.TrimSuffix(id, "?done=started")
}

func TestSessionsList_FiltersByAgentAndLabels(t *testing.T) {
	b := newBrowser(t, serveFake(t, bulkAPI(), Config{}))
	body := wantStatus(t, b.get("/ui/sessions?label=team%3Dsearch"), http.StatusOK, "ses-idle", "ses-search-busy", "2 on this page", "label team=search",
		`<input name="label" value="team=search"`)
	if strings.Contains(body, "ses-closed") || strings.Contains(body, `id="row-ses-busy"`) {
		t.Fatal("the label filter shows a session without the label")
	}
	body = wantStatus(t, b.get("/ui/sessions?label=team%3Dsearch&agent=bot%402"), http.StatusOK, "ses-search-busy", "1 on this page")
	if strings.Contains(body, `id="row-ses-idle"`) {
		t.Fatal("the agent filter shows a session of another agent")
	}
	// The status links keep the rest of the filter.
	wantStatus(t, b.get("/ui/sessions?label=team%3Dsearch"), http.StatusOK, `href="/ui/sessions?label=team%3Dsearch&amp;status=waiting"`)
	wantStatus(t, b.get("/ui/sessions?label=team"), http.StatusBadRequest, `label filter &#34;team&#34;: write KEY=VALUE`)
	wantStatus(t, b.get("/ui/sessions?label=a%3D1&label=a%3D2"), http.StatusBadRequest, `label &#34;a&#34; is filtered on twice`)
	wantStatus(t, b.get("/ui/sessions?agent=bad+agent"), http.StatusBadRequest, `agent &#34;bad agent&#34;`)
}

func TestBulk_CancelOnTheListsFilterFollowsTheJobAndCancelsIt(t *testing.T) {
	api := bulkAPI()
	b := newBrowser(t, serveFake(t, api, Config{}))
	// With a filter, the form acts on exactly it.
	body := wantStatus(t, b.get("/ui/sessions?label=team%3Dsearch&status=waiting"), http.StatusOK, `id="bulkform"`, `<details id="bulk" open>`,
		`<b id="bulkfilter">status waiting, label team=search</b>`, `<input type="hidden" name="label" value="team=search">`, `<input type="hidden" name="status" value="waiting">`)
	if strings.Contains(body, `name="all"`) {
		t.Fatal("a filtered list's form offers the all-sessions box")
	}
	id := jobOf(t, b.post("/ui/bulk", url.Values{"status": {"waiting"}, "label": {"team=search"}, "action": {"cancel"}, "reason": {"batch stopped"}}))
	wantWrites(t, api, "bulk cancel filter={status waiting, label team=search} labels= reason=batch stopped all=false")

	// While it runs the page reloads itself and offers to cancel it.
	wantStatus(t, b.get("/ui/bulk/"+id+"?done=started"), http.StatusOK, "Job started", `<meta http-equiv="refresh" content="2; url=/ui/bulk/`+id+`">`,
		`id="canceljob"`, "running", "status waiting, label team=search", "(reason: batch stopped)")
	wantStatus(t, b.get("/ui/bulk"), http.StatusOK, `href="/ui/bulk/`+id+`"`, "<td>cancel</td>", "running")

	api.runJobs()
	body = wantStatus(t, b.get("/ui/bulk/"+id), http.StatusOK, `<span class="st st-done">done</span>`, `<dd id="job-acted">1</dd>`, `<dd id="job-failed">0</dd>`)
	if strings.Contains(body, "http-equiv") || strings.Contains(body, `id="canceljob"`) {
		t.Fatal("an ended job's page reloads or offers to cancel it")
	}
	if s := api.sessions["ses-search-busy"].Session; s.Turn != nil || api.sessions["ses-busy"].Session.Turn == nil {
		t.Fatal("the job did not act on exactly the filter's sessions")
	}
}

func TestBulk_CancelJob(t *testing.T) {
	api := bulkAPI()
	b := newBrowser(t, serveFake(t, api, Config{}))
	b.get("/ui/sessions?label=team%3Dsearch")
	id := jobOf(t, b.post("/ui/bulk", url.Values{"label": {"team=search"}, "action": {"close"}}))
	wantStatus(t, b.post("/ui/bulk/"+id+"/cancel", url.Values{"csrf": {""}}), http.StatusForbidden, "CSRF token is missing or stale")
	wantRedirect(t, b.post("/ui/bulk/"+id+"/cancel", url.Values{}), "/ui/bulk/"+id+"?done=cancelled")
	body := wantStatus(t, b.get("/ui/bulk/"+id+"?done=cancelled"), http.StatusOK, "Job cancelled", "cancelled by a client", `<dd id="job-acted">0</dd>`)
	if strings.Contains(body, "http-equiv") {
		t.Fatal("a cancelled job's page reloads")
	}
	wantWrites(t, api, "bulk close filter={label team=search} labels= reason= all=false", "cancel job "+id)
	wantStatus(t, b.post("/ui/bulk/bulk-none/cancel", url.Values{}), http.StatusNotFound, `bulk job &#34;bulk-none&#34; not found`)
	wantStatus(t, b.get("/ui/bulk/bulk-none"), http.StatusNotFound, `bulk job &#34;bulk-none&#34; not found`)
}

func TestBulk_EachActionAsksTheAPIForIt(t *testing.T) {
	api := bulkAPI()
	b := newBrowser(t, serveFake(t, api, Config{}))
	b.get("/ui/sessions")
	for _, form := range []url.Values{
		{"agent": {"bot@2"}, "action": {"resume"}, "reason": {"ignored"}},
		{"status": {"idle"}, "action": {"close"}},
		{"label": {"team=search"}, "action": {"delete"}},
		{"label": {"team=search"}, "action": {"label"}, "set": {"owner=ana\nstage = two"}},
		// No filter: the box says every session, and a delete carries all.
		{"action": {"delete"}, "all": {"yes"}},
		{"action": {"cancel"}, "all": {"yes"}},
	} {
		jobOf(t, b.post("/ui/bulk", form))
	}
	wantWrites(t, api,
		"bulk resume filter={agent bot@2} labels= reason= all=false",
		"bulk close filter={status idle} labels= reason= all=false",
		"bulk delete filter={label team=search} labels= reason= all=false",
		"bulk label filter={label team=search} labels=owner=ana,stage=two reason= all=false",
		"bulk delete filter={every session} labels= reason= all=true",
		"bulk cancel filter={every session} labels= reason= all=true")
}

func TestBulk_BadFormsAndRefusalsStartNothing(t *testing.T) {
	api := bulkAPI()
	b := newBrowser(t, serveFake(t, api, Config{}))
	// Without a filter the form is folded and asks for the box.
	wantStatus(t, b.get("/ui/sessions"), http.StatusOK, `<details id="bulk">`, `name="all" value="yes"`)
	cases := []struct {
		form url.Values
		code int
		msg  string
	}{
		{url.Values{"action": {"delete"}}, http.StatusBadRequest, "no filter is applied, so this would delete every session: filter the list, or tick “all sessions”"},
		{url.Values{"action": {"cancel"}, "reason": {"x"}}, http.StatusBadRequest, "this would cancel every session"},
		{url.Values{"label": {"team=search"}, "action": {"explode"}}, http.StatusBadRequest, `bulk action "explode": choose cancel, resume, close, delete or label`},
		{url.Values{"label": {"team=search"}, "action": {"label"}}, http.StatusBadRequest, "a label job needs the labels to set"},
		{url.Values{"label": {"team=search"}, "action": {"label"}, "set": {"owner"}}, http.StatusBadRequest, `label "owner": write KEY=VALUE`},
		{url.Values{"label": {"team=search"}, "q": {"ses"}, "action": {"close"}}, http.StatusBadRequest, "a bulk job cannot act on an id lookup (“ses”)"},
		{url.Values{"created_since": {"soon"}, "action": {"close"}}, http.StatusBadRequest, `created_since "soon": write a duration ago`},
		{url.Values{"label": {"team=search"}, "action": {"close"}, "csrf": {""}}, http.StatusForbidden, "CSRF token is missing or stale"},
		// The API's refusal, in its words.
		{url.Values{"label": {"team=search"}, "action": {"label"}, "set": {"Owner=ana"}}, http.StatusBadRequest, `label key "Owner": only a-z`},
	}
	for _, c := range cases {
		body := wantStatus(t, b.post("/ui/bulk", c.form), c.code, html.EscapeString(c.msg))
		// The list comes back with the form as typed.
		if s := c.form.Get("set"); s != "" && !strings.Contains(body, ">"+s+"</textarea>") {
			t.Fatalf("the refused form lost its labels %q:\n%s", s, body)
		}
	}
	wantStatus(t, b.post("/ui/bulk", url.Values{"status": {"sleepy"}, "action": {"close"}}), http.StatusBadRequest, `unknown status &#34;sleepy&#34;`)
	wantWrites(t, api)
}

// A reader's list has no bulk form and a job's page no cancel button; a
// form posted anyway is the API's refusal.
func TestBulk_ReaderToken(t *testing.T) {
	api := bulkAPI()
	api.tokens = map[string]bool{"reader": false, "writer": true}
	b := newBrowser(t, serveFake(t, api, Config{ACL: true}))
	b.cookies[tokenCookie] = &http.Cookie{Name: tokenCookie, Value: "writer"}
	b.get("/ui/sessions")
	id := jobOf(t, b.post("/ui/bulk", url.Values{"label": {"team=search"}, "action": {"close"}}))
	wantStatus(t, b.get("/ui/bulk/"+id), http.StatusOK, `id="canceljob"`)

	b.cookies[tokenCookie] = &http.Cookie{Name: tokenCookie, Value: "reader"}
	pages := wantStatus(t, b.get("/ui/sessions?label=team%3Dsearch"), http.StatusOK) + wantStatus(t, b.get("/ui/bulk/"+id), http.StatusOK)
	if strings.Contains(pages, `id="bulkform"`) || strings.Contains(pages, `id="canceljob"`) {
		t.Fatal("a reader's pages offer a bulk action")
	}
	wantStatus(t, b.post("/ui/bulk", url.Values{"label": {"team=search"}, "action": {"close"}}), http.StatusForbidden, "a reader token may not call this")
	wantStatus(t, b.post("/ui/bulk/"+id+"/cancel", url.Values{}), http.StatusForbidden, "a reader token may not call this")
	wantWrites(t, api, "bulk close filter={label team=search} labels= reason= all=false")
}
