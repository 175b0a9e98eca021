package console

import (
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// manageAPI holds an idle session, one in a turn and a closed one.
func manageAPI() *fakeAPI {
	api := newFakeAPI()
	api.add(&dexv1.Session{Id: "ses-idle", Status: dexv1.SessionStatus_SESSION_STATUS_IDLE, CreatedAtMs: 1000,
		Labels: []*dexv1.Label{{Key: "team", Value: "search"}},
		History: []*dexv1.HistoryEntry{
			{Seq: 1, Kind: dexv1.HistoryKind_HISTORY_KIND_USER, Text: "find the bug"},
			{Seq: 2, Kind: dexv1.HistoryKind_HISTORY_KIND_ASSISTANT, Text: "it is in the parser"},
		}})
	api.add(&dexv1.Session{Id: "ses-busy", Status: dexv1.SessionStatus_SESSION_STATUS_RUNNING, CreatedAtMs: 2000,
		Turn: &dexv1.Turn{Number: 2, FirstHistorySeq: 3},
		History: []*dexv1.HistoryEntry{
			{Seq: 1, Kind: dexv1.HistoryKind_HISTORY_KIND_USER, Text: "first"},
			{Seq: 2, Kind: dexv1.HistoryKind_HISTORY_KIND_ASSISTANT, Text: "done first"},
			{Seq: 3, Kind: dexv1.HistoryKind_HISTORY_KIND_USER, Text: "second"},
		}})
	api.add(&dexv1.Session{Id: "ses-closed", Status: dexv1.SessionStatus_SESSION_STATUS_CLOSED, CreatedAtMs: 500, ClosedAtMs: 900})
	return api
}

func wantWrites(t *testing.T, api *fakeAPI, want ...string) {
	t.Helper()
	if got := api.writes(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("writes %q; want %q", got, want)
	}
}

func wantRedirect(t *testing.T, rec interface{ Result() *http.Response }, to string) {
	t.Helper()
	res := rec.Result()
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != to {
		t.Fatalf("answer %d to %q; want 303 to %q", res.StatusCode, res.Header.Get("Location"), to)
	}
}

func TestStart_CreatesTheSessionAndShowsIt(t *testing.T) {
	api := manageAPI()
	b := newBrowser(t, serveFake(t, api, Config{}))
	wantStatus(t, b.get("/ui/sessions"), http.StatusOK, `href="/ui/start"`)
	wantStatus(t, b.get("/ui/start"), http.StatusOK, `name="message"`, `name="agent"`, `name="labels"`, `name="csrf"`)
	rec := b.post("/ui/start", url.Values{"id": {"ses-new"}, "agent": {"bot@2"}, "message": {"hello there"}, "labels": {"team=search\n\nenv = prod, eu\n"}})
	wantRedirect(t, rec, "/ui/sessions/ses-new?done=started")
	wantWrites(t, api, "create ses-new agent=bot@2 labels=team=search,env=prod, eu message=hello there")
	wantStatus(t, b.get("/ui/sessions/ses-new?done=started"), http.StatusOK, "Session started.", "<code>bot@2</code>", "team=search", "env=prod, eu", "hello there")

	// Without a message the session is idle; without an id the cluster
	// draws one.
	rec = b.post("/ui/start", url.Values{"message": {"  "}})
	if loc := rec.Header().Get("Location"); rec.Code != http.StatusSeeOther || !strings.HasPrefix(loc, "/ui/sessions/ses-new") {
		t.Fatalf("start without an id: %d to %q", rec.Code, loc)
	}
	if w := api.writes(); w[1] != "create ses-new5 agent= labels= message=" {
		t.Fatalf("a blank message was sent: %q", w[1])
	}
}

func TestStart_BadFormsAndRefusalsChangeNothing(t *testing.T) {
	api := manageAPI()
	b := newBrowser(t, serveFake(t, api, Config{}))
	b.get("/ui/start")
	cases := []struct {
		form url.Values
		code int
		msg  string
	}{
		{url.Values{"labels": {"team"}}, http.StatusBadRequest, `label "team": write KEY=VALUE, one a line`},
		{url.Values{"labels": {"=x"}}, http.StatusBadRequest, `label "=x": write KEY=VALUE`},
		{url.Values{"labels": {"a=1\na=2"}}, http.StatusBadRequest, `label "a" is given twice`},
		{url.Values{"labels": {strings.Repeat("k=v\n", 1) + labelLines(33)}}, http.StatusBadRequest, "a session holds at most 32"},
		{url.Values{"agent": {"bad agent"}}, http.StatusBadRequest, `agent "bad agent"`},
		{url.Values{"id": {"a/b"}}, http.StatusBadRequest, `session id "a/b"`},
		// The API's refusals, in its words.
		{url.Values{"labels": {"Team=x"}}, http.StatusBadRequest, `label key "Team": only a-z`},
		{url.Values{"id": {"ses-idle"}, "message": {"keep me"}}, http.StatusConflict, `session "ses-idle" already exists`},
		{url.Values{"message": {"hi"}, "csrf": {""}}, http.StatusForbidden, "CSRF token is missing or stale"},
	}
	for _, c := range cases {
		body := wantStatus(t, b.post("/ui/start", c.form), c.code, html.EscapeString(c.msg))
		// The form comes back as typed.
		if m := c.form.Get("message"); m != "" && !strings.Contains(body, ">"+m+"</textarea>") {
			t.Fatalf("the refused form lost its message %q:\n%s", m, body)
		}
	}
	wantWrites(t, api)
}

func labelLines(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString("k" + strings.Repeat("x", i+1) + "=v\n")
	}
	return b.String()
}

func TestSend_DeliversOnceAndRefusesAnEmptyMessage(t *testing.T) {
	api := manageAPI()
	b := newBrowser(t, serveFake(t, api, Config{}))
	body := wantStatus(t, b.get("/ui/sessions/ses-idle"), http.StatusOK, `action="/ui/sessions/ses-idle/send"`, `name="key" value="key-`)
	key := between(body, `name="key" value="`, `"`)
	wantRedirect(t, b.post("/ui/sessions/ses-idle/send", url.Values{"text": {"look again"}, "key": {key}}), "/ui/sessions/ses-idle?done=sent")
	wantStatus(t, b.get("/ui/sessions/ses-idle?done=sent"), http.StatusOK, "Message sent.")
	// The same form sent again (a double click) delivers nothing more.
	wantRedirect(t, b.post("/ui/sessions/ses-idle/send", url.Values{"text": {"look again"}, "key": {key}}), "/ui/sessions/ses-idle?done=duplicate")
	wantStatus(t, b.get("/ui/sessions/ses-idle?done=duplicate"), http.StatusOK, "This message was sent before")

	wantStatus(t, b.post("/ui/sessions/ses-idle/send", url.Values{"text": {" \n "}}), http.StatusBadRequest, "the message is empty")
	wantStatus(t, b.post("/ui/sessions/ses-closed/send", url.Values{"text": {"hello?"}}), http.StatusConflict, "session ses-closed is closed: it takes no more messages")
	wantStatus(t, b.post("/ui/sessions/ses-gone/send", url.Values{"text": {"hello?"}}), http.StatusNotFound, "session ses-gone not found")
	wantWrites(t, api, "send ses-idle look again")
	// A closed session offers no message box.
	if body := wantStatus(t, b.get("/ui/sessions/ses-closed"), http.StatusOK); strings.Contains(body, "/send") {
		t.Fatal("a closed session offers to send a message")
	}
}

func between(s, from, to string) string {
	_, after, _ := strings.Cut(s, from)
	v, _, _ := strings.Cut(after, to)
	return v
}

func TestCancel_StopsTheTurnOrSaysWhyNot(t *testing.T) {
	api := manageAPI()
	b := newBrowser(t, serveFake(t, api, Config{}))
	if body := wantStatus(t, b.get("/ui/sessions/ses-idle"), http.StatusOK); strings.Contains(body, "Cancel the turn") {
		t.Fatal("a session without a turn offers to cancel it")
	}
	wantStatus(t, b.get("/ui/sessions/ses-busy"), http.StatusOK, "Cancel the turn")
	wantRedirect(t, b.post("/ui/sessions/ses-busy/cancel", url.Values{"reason": {"wrong task"}}), "/ui/sessions/ses-busy?done=cancelled")
	wantStatus(t, b.get("/ui/sessions/ses-busy?done=cancelled"), http.StatusOK, "Cancelled: the turn stopped", `<span class="st st-idle" id="status">idle</span>`)
	// Again: the API's refusal, and nothing changes.
	wantStatus(t, b.post("/ui/sessions/ses-busy/cancel", url.Values{}), http.StatusConflict, "session ses-busy has no turn to cancel")
	wantWrites(t, api, "cancel ses-busy by an operator in the console: wrong task")
}

func TestClose_ClosesAtRestAndClosingInATurn(t *testing.T) {
	api := manageAPI()
	b := newBrowser(t, serveFake(t, api, Config{}))
	b.get("/ui/sessions/ses-idle")
	wantRedirect(t, b.post("/ui/sessions/ses-idle/close", url.Values{}), "/ui/sessions/ses-idle?done=closed")
	body := wantStatus(t, b.get("/ui/sessions/ses-idle?done=closed"), http.StatusOK, "Closed: the session takes no more messages", "<dt>Closed</dt>")
	if strings.Contains(body, `id="closeform"`) || strings.Contains(body, `id="sendform"`) {
		t.Fatal("a closed session offers to close it or send to it")
	}
	wantRedirect(t, b.post("/ui/sessions/ses-busy/close", url.Values{}), "/ui/sessions/ses-busy?done=closing")
	wantStatus(t, b.get("/ui/sessions/ses-busy?done=closing"), http.StatusOK, "Closing: the session takes no more messages and closes when its turn ends", "<dt>Closing</dt>")
	wantStatus(t, b.post("/ui/sessions/ses-gone/close", url.Values{}), http.StatusNotFound, "session ses-gone not found")
	wantWrites(t, api, "close ses-idle", "close ses-busy")
}

func TestDelete_AsksToConfirmAndShowsARefusal(t *testing.T) {
	api := manageAPI()
	b := newBrowser(t, serveFake(t, api, Config{}))
	wantStatus(t, b.get("/ui/sessions/ses-busy"), http.StatusOK, `action="/ui/sessions/ses-busy/delete"`, `name="confirm" value="yes"`)
	wantStatus(t, b.post("/ui/sessions/ses-idle/delete", url.Values{}), http.StatusBadRequest, html.EscapeString("tick “delete this session and all it holds” to delete it"))
	wantStatus(t, b.post("/ui/sessions/ses-busy/delete", url.Values{"confirm": {"yes"}}), http.StatusConflict, "session ses-busy is running: cancel its turn first")
	wantWrites(t, api)

	wantRedirect(t, b.post("/ui/sessions/ses-idle/delete", url.Values{"confirm": {"yes"}}), "/ui/sessions?id=ses-idle&done=deleted")
	body := wantStatus(t, b.get("/ui/sessions?id=ses-idle&done=deleted"), http.StatusOK, "Deleted session ses-idle.")
	if strings.Contains(body, `id="row-ses-idle"`) {
		t.Fatal("the deleted session is still listed")
	}
	wantStatus(t, b.get("/ui/sessions/ses-idle"), http.StatusNotFound, "session ses-idle not found")
	wantWrites(t, api, "delete ses-idle")
}

func TestFork_FromATimelineEntry(t *testing.T) {
	api := manageAPI()
	b := newBrowser(t, serveFake(t, api, Config{}))
	wantStatus(t, b.get("/ui/sessions/ses-idle"), http.StatusOK, `href="/ui/sessions/ses-idle/fork?at=1"`, `href="/ui/sessions/ses-idle/fork?at=2"`)
	wantStatus(t, b.get("/ui/sessions/ses-idle/fork?at=2"), http.StatusOK, "Fork <a", "at entry #2", "it is in the parser", `name="at" value="2"`, "team=search")

	rec := b.post("/ui/sessions/ses-idle/fork", url.Values{"at": {"2"}, "id": {"ses-idle-b"}, "message": {"try the lexer"}, "labels": {"team=lexer"}})
	wantRedirect(t, rec, "/ui/sessions/ses-idle-b?done=forked")
	wantWrites(t, api, "fork ses-idle at 2 as ses-idle-b agent= labels=team=lexer message=try the lexer")
	wantStatus(t, b.get("/ui/sessions/ses-idle-b?done=forked"), http.StatusOK, "Forked: this session", `<dd id="forkedfrom"><a href="/ui/sessions/ses-idle">ses-idle</a> at entry #2</dd>`, "team=lexer", "it is in the parser")
	wantStatus(t, b.get("/ui/sessions"), http.StatusOK, `fork of <a href="/ui/sessions/ses-idle">ses-idle</a> at #2`)
}

func TestFork_RefusalsAreShownOnTheFormAndChangeNothing(t *testing.T) {
	api := manageAPI()
	b := newBrowser(t, serveFake(t, api, Config{}))
	// The timeline says which entries are in the turn in progress.
	wantStatus(t, b.get("/ui/sessions/ses-busy"), http.StatusOK, `id="fork-3" href="/ui/sessions/ses-busy/fork?at=3" title="this entry is in the turn in progress`)
	// The API's reason for an entry of a turn that has not ended, on the
	// form as typed.
	body := wantStatus(t, b.post("/ui/sessions/ses-busy/fork", url.Values{"at": {"3"}, "message": {"my typed text"}}), http.StatusConflict,
		"entry 3 is in turn 2 of session ses-busy, which has not ended: fork before entry 3", ">my typed text</textarea>")
	if !strings.Contains(body, `id="forkform"`) {
		t.Fatal("the refused fork does not show its form again")
	}
	wantStatus(t, b.post("/ui/sessions/ses-idle/fork", url.Values{"at": {"9"}}), http.StatusBadRequest, "session ses-idle holds no history entry 9")
	wantStatus(t, b.post("/ui/sessions/ses-idle/fork", url.Values{"at": {"1"}, "labels": {"Team=x"}}), http.StatusBadRequest, `label key &#34;Team&#34;: only a-z`)
	wantStatus(t, b.post("/ui/sessions/ses-gone/fork", url.Values{"at": {"1"}}), http.StatusNotFound, "session ses-gone not found")
	// Refused before any call.
	wantStatus(t, b.post("/ui/sessions/ses-idle/fork", url.Values{"at": {"0"}}), http.StatusBadRequest, "give the seq of a history entry")
	wantStatus(t, b.post("/ui/sessions/ses-idle/fork", url.Values{"at": {"x"}}), http.StatusBadRequest, "give the seq of a history entry")
	wantStatus(t, b.post("/ui/sessions/ses-idle/fork", url.Values{"at": {"1"}, "labels": {"nolabel"}}), http.StatusBadRequest, `label &#34;nolabel&#34;: write KEY=VALUE`)
	wantStatus(t, b.post("/ui/sessions/ses-idle/fork", url.Values{"at": {"1"}, "agent": {"a b"}}), http.StatusBadRequest, `agent &#34;a b&#34;`)
	wantStatus(t, b.post("/ui/sessions/ses-idle/fork", url.Values{"at": {"1"}, "csrf": {""}}), http.StatusForbidden, "CSRF token is missing or stale")
	wantStatus(t, b.get("/ui/sessions/ses-idle/fork?at=9"), http.StatusNotFound, "session ses-idle holds no history entry 9")
	wantStatus(t, b.get("/ui/sessions/ses-idle/fork"), http.StatusBadRequest, "give the seq of a history entry")
	wantWrites(t, api)
}

// A token that may read but not act sees no action form, and an action
// it posts anyway is the API's refusal.
func TestReaderToken_SeesNoActions(t *testing.T) {
	api := manageAPI()
	api.tokens = map[string]bool{"reader": false, "writer": true}
	b := newBrowser(t, serveFake(t, api, Config{ACL: true}))
	b.cookies[tokenCookie] = &http.Cookie{Name: tokenCookie, Value: "reader"}
	actions := []string{`id="sendform"`, `id="cancelform"`, `id="closeform"`, `id="deleteform"`, `class="forkhere"`, `href="/ui/start"`, `id="startform"`, `id="forkform"`}
	var pages string
	for _, p := range []string{"/ui/sessions", "/ui/sessions/ses-busy", "/ui/start", "/ui/sessions/ses-idle/fork?at=1"} {
		pages += wantStatus(t, b.get(p), http.StatusOK)
	}
	for _, a := range actions {
		if strings.Contains(pages, a) {
			t.Fatalf("a reader's pages offer %s", a)
		}
	}
	wantStatus(t, b.post("/ui/sessions/ses-idle/send", url.Values{"text": {"hi"}}), http.StatusForbidden, "a reader token may not call this")
	wantStatus(t, b.post("/ui/start", url.Values{"message": {"hi"}}), http.StatusForbidden, "a reader token may not call this")
	wantStatus(t, b.post("/ui/sessions/ses-idle/fork", url.Values{"at": {"1"}}), http.StatusForbidden, "a reader token may not call this")
	wantWrites(t, api)

	b.cookies[tokenCookie] = &http.Cookie{Name: tokenCookie, Value: "writer"}
	pages = ""
	for _, p := range []string{"/ui/sessions", "/ui/sessions/ses-busy", "/ui/start", "/ui/sessions/ses-idle/fork?at=1"} {
		pages += wantStatus(t, b.get(p), http.StatusOK)
	}
	for _, a := range actions {
		if !strings.Contains(pages, a) {
			t.Fatalf("a writer's pages lack %s", a)
		}
	}
}

func (f *fakeAPI) probeCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.probes
}

// The write probe's answer is kept for a while per token; an answer that
// says nothing of the token (no node serving clients) shows the actions
// and is asked again on the next page.
func TestWriteProbe_IsKeptPerTokenAndAnUnknownAnswerShowsTheActions(t *testing.T) {
	api := manageAPI()
	api.tokens = map[string]bool{"reader": false, "writer": true}
	b := newBrowser(t, serveFake(t, api, Config{ACL: true}))
	b.cookies[tokenCookie] = &http.Cookie{Name: tokenCookie, Value: "reader"}
	for range 3 {
		if body := wantStatus(t, b.get("/ui/sessions/ses-idle"), http.StatusOK); strings.Contains(body, `id="sendform"`) {
			t.Fatal("a reader is offered to send")
		}
	}
	if n := api.probeCount(); n != 1 {
		t.Fatalf("%d probes for three pages of one token; want 1", n)
	}
	b.cookies[tokenCookie] = &http.Cookie{Name: tokenCookie, Value: "writer"}
	wantStatus(t, b.get("/ui/sessions/ses-idle"), http.StatusOK, `id="sendform"`)
	if n := api.probeCount(); n != 2 {
		t.Fatalf("%d probes after a second token; want 2", n)
	}

	api.mu.Lock()
	api.probeDown = "no node serves clients"
	api.mu.Unlock()
	other := newBrowser(t, serveFake(t, api, Config{ACL: true}))
	other.cookies[tokenCookie] = &http.Cookie{Name: tokenCookie, Value: "reader"}
	wantStatus(t, other.get("/ui/sessions/ses-idle"), http.StatusOK, `id="sendform"`)
	wantStatus(t, other.get("/ui/sessions/ses-idle"), http.StatusOK, `id="sendform"`)
	if n := api.probeCount(); n != 4 {
		t.Fatalf("%d probes; an unknown answer is not kept, want 4", n)
	}
	// Without --acl there is nothing to ask.
	open := newFakeAPI()
	open.add(&dexv1.Session{Id: "s1", Status: dexv1.SessionStatus_SESSION_STATUS_IDLE})
	wantStatus(t, newBrowser(t, serveFake(t, open, Config{})).get("/ui/sessions/s1"), http.StatusOK, `id="sendform"`)
	if open.probeCount() != 0 {
		t.Fatal("the console probed a cluster without tokens")
	}
}
