package console

import (
	"fmt"
	"html"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// sampleAPI holds one session of each kind the pages show.
func sampleAPI() *fakeAPI {
	api := newFakeAPI()
	api.add(&dexv1.Session{Id: "ses-wait", Status: dexv1.SessionStatus_SESSION_STATUS_WAITING, CreatedAtMs: 3000,
		History: []*dexv1.HistoryEntry{
			{Seq: 1, Kind: dexv1.HistoryKind_HISTORY_KIND_USER, Text: "ship it"},
			{Seq: 2, Kind: dexv1.HistoryKind_HISTORY_KIND_ASSISTANT, Text: "deploying", ToolCalls: []*dexv1.ToolCall{{CallId: "c1", Tool: "deploy", Arguments: `{"env":"prod"}`}}},
			{Seq: 3, Kind: dexv1.HistoryKind_HISTORY_KIND_TOOL_RESULT, CallId: "c0", Tool: "lookup", Text: "found x", Outcome: dexv1.Outcome_OUTCOME_SUCCEEDED},
			{Seq: 4, Kind: dexv1.HistoryKind_HISTORY_KIND_SUMMARY, Text: "so far so good"},
		}},
		&dexv1.Step{Id: "ses-wait/1", Number: 1, Turn: 1, Kind: dexv1.StepKind_STEP_KIND_RUN_MODEL, Status: dexv1.StepStatus_STEP_STATUS_DONE, Outcome: dexv1.Outcome_OUTCOME_SUCCEEDED,
			Attempts: []*dexv1.Attempt{
				{N: 1, WorkerId: "w-alpha", Status: dexv1.AttemptStatus_ATTEMPT_STATUS_FAILED, ErrorType: dexv1.ErrorType_ERROR_TYPE_RATE_LIMIT, Error: "slow down", StartedAtMs: 1000, EndedAtMs: 1100},
				{N: 2, WorkerId: "w-beta", Status: dexv1.AttemptStatus_ATTEMPT_STATUS_SUCCEEDED, StartedAtMs: 1200, ClaimedAtMs: 1210, EndedAtMs: 1300},
			}},
		&dexv1.Step{Id: "ses-wait/2", Number: 2, Turn: 1, Kind: dexv1.StepKind_STEP_KIND_AWAIT_TOOL_APPROVAL, Status: dexv1.StepStatus_STEP_STATUS_WAITING, CallId: "c1", Tool: "deploy", Arguments: `{"env":"prod"}`},
		&dexv1.Step{Id: "ses-wait/3", Number: 3, Turn: 1, Kind: dexv1.StepKind_STEP_KIND_AWAIT_QUESTION_ANSWER, Status: dexv1.StepStatus_STEP_STATUS_WAITING, CallId: "c2", Tool: "ask_user", Prompt: "Which region?"},
		&dexv1.Step{Id: "ses-wait/4", Number: 4, Turn: 1, Kind: dexv1.StepKind_STEP_KIND_AWAIT_TIMER, Status: dexv1.StepStatus_STEP_STATUS_WAITING, CallId: "c3", Tool: "sleep", DueAtMs: 1_700_000_000_000},
	)
	api.add(&dexv1.Session{Id: "ses-paused", Status: dexv1.SessionStatus_SESSION_STATUS_PAUSED, CreatedAtMs: 2000,
		LastErrorType: dexv1.ErrorType_ERROR_TYPE_INVALID_REQUEST, LastError: "prompt too odd",
		PauseReason: dexv1.PauseReason_PAUSE_REASON_LIMIT, PauseMessage: "rejected three times",
		Usage:     &dexv1.UsageTotals{InputTokens: 400, OutputTokens: 100, CostMicros: 900, ModelCalls: 2, ToolCalls: 3},
		TreeUsage: &dexv1.UsageTotals{InputTokens: 700, OutputTokens: 200, CostMicros: 1500, ModelCalls: 4, ToolCalls: 3},
		Budget:    &dexv1.Budget{MaxTokens: 1000, MaxTurns: 5}})
	api.add(&dexv1.Session{Id: "ses-unknown", Status: dexv1.SessionStatus_SESSION_STATUS_IDLE, CreatedAtMs: 1000},
		&dexv1.Step{Id: "ses-unknown/1", Number: 1, Turn: 1, Kind: dexv1.StepKind_STEP_KIND_CALL_SINGLE_ATTEMPT_TOOL, Status: dexv1.StepStatus_STEP_STATUS_DONE,
			Outcome: dexv1.Outcome_OUTCOME_UNKNOWN, CallId: "c9", Tool: "send_email", Arguments: `{"to":"a@b"}`})
	return api
}

// nextLink is the page's Next link, "" when it has none.
func nextLink(t *testing.T, body string) string {
	t.Helper()
	_, after, ok := strings.Cut(body, `<a href="`)
	for ok {
		var link string
		link, after, _ = strings.Cut(after, `"`)
		if strings.HasPrefix(after, ` rel="next"`) {
			return html.UnescapeString(link)
		}
		_, after, ok = strings.Cut(after, `<a href="`)
	}
	return ""
}

func TestSessionsPage_NewestFirstAndPagesWithTokens(t *testing.T) {
	api := sampleAPI()
	for i := range 120 {
		api.add(&dexv1.Session{Id: fmt.Sprintf("bulk-%03d", i), Status: dexv1.SessionStatus_SESSION_STATUS_IDLE, CreatedAtMs: int64(10_000 + i)})
	}
	b := newBrowser(t, serveFake(t, api, Config{}))

	// The status filter is links, without counts (they would need every
	// session read).
	body := wantStatus(t, b.get("/ui/sessions"), http.StatusOK, `<a href="/ui/sessions" class="on">all</a>`, `<a href="/ui/sessions?status=waiting">waiting</a>`,
		"every session · by created time, newest first · 50 on this page")
	if strings.Index(body, "bulk-119") > strings.Index(body, "bulk-118") || strings.Contains(body, "bulk-069") || !strings.Contains(body, "bulk-070") {
		t.Fatal("page 1 is not the 50 newest sessions, newest first")
	}
	if strings.Contains(body, `rel="first"`) {
		t.Fatal("the first page links to the first page")
	}
	// Every call asked the API for the page in its order: the console
	// sorts and filters nothing itself.
	for _, req := range api.listRequests() {
		if req.OrderBy != dexv1.SessionOrder_SESSION_ORDER_CREATED || !req.Descending || req.PageSize == 0 || req.PageSize > sessionsPerPage {
			t.Fatalf("request %v; want created order, newest first, at most a page", req)
		}
	}
	next := nextLink(t, body)
	if !strings.Contains(next, "token=") {
		t.Fatalf("page 1's next link %q carries no token", next)
	}
	body = wantStatus(t, b.get(next), http.StatusOK, "bulk-069", "bulk-020", `<a href="/ui/sessions" rel="first">`)
	if strings.Contains(body, "bulk-070") || strings.Contains(body, "bulk-019") {
		t.Fatal("page 2 is not the next 50")
	}
	body = wantStatus(t, b.get(nextLink(t, body)), http.StatusOK, "bulk-000", "ses-wait", "ses-unknown", "23 on this page")
	if strings.Index(body, "ses-wait") > strings.Index(body, "ses-unknown") || nextLink(t, body) != "" {
		t.Fatal("the last page is not newest first, or links on")
	}
	body = wantStatus(t, b.get("/ui/sessions?dir=oldest"), http.StatusOK, "oldest first", `<option value="oldest" selected>`)
	if strings.Index(body, "ses-unknown") > strings.Index(body, "ses-paused") || strings.Contains(body, "bulk-119") {
		t.Fatal("oldest first does not begin with the oldest")
	}

	body = wantStatus(t, b.get("/ui/sessions?status=waiting"), http.StatusOK, "ses-wait", `<a href="/ui/sessions?status=waiting" class="on">waiting</a>`)
	if strings.Contains(body, "bulk-") || strings.Contains(body, "ses-paused") || nextLink(t, body) != "" {
		t.Fatal("the waiting filter shows other sessions, or links on past the end")
	}
}

// The API's pages of a sparse filter may come back short or empty with a
// token: the console reads on, up to maxListCalls calls a page, and a
// page that is still short links on.
func TestSessionsPage_ShortPagesAreReadOnBounded(t *testing.T) {
	api := sampleAPI()
	for i := range 60 {
		api.add(&dexv1.Session{Id: fmt.Sprintf("bulk-%03d", i), Status: dexv1.SessionStatus_SESSION_STATUS_IDLE, CreatedAtMs: int64(10_000 + i)})
	}
	api.scan = 2 // each page examines two sessions
	b := newBrowser(t, serveFake(t, api, Config{}))
	body := wantStatus(t, b.get("/ui/sessions?status=paused"), http.StatusOK, `id="short"`)
	if n := len(api.listRequests()); n != maxListCalls {
		t.Fatalf("%d ListSessions calls for a page; want the bound, %d", n, maxListCalls)
	}
	if strings.Contains(body, "ses-paused") {
		t.Fatal("the paused session is shown before the sessions examined reached it")
	}
	next := nextLink(t, body)
	if next == "" {
		t.Fatal("a short page with more to read has no next link")
	}
	body = wantStatus(t, b.get(next), http.StatusOK, `id="row-ses-paused"`, `rel="first"`)
	if strings.Contains(body, `id="short"`) || nextLink(t, body) != "" || strings.Contains(body, "bulk-") {
		t.Fatal("the end of the list is short, links on, or shows other sessions")
	}
	for _, req := range api.listRequests() {
		if req.Status != dexv1.SessionStatus_SESSION_STATUS_PAUSED {
			t.Fatalf("a request %v lost the status filter", req)
		}
	}
}

// q opens the session of exactly that id; an id no session has is said so.
func TestSessionsPage_LookupByID(t *testing.T) {
	api := sampleAPI()
	b := newBrowser(t, serveFake(t, api, Config{}))
	wantRedirect(t, b.get("/ui/sessions?q=ses-wait"), "/ui/sessions/ses-wait")
	body := wantStatus(t, b.get("/ui/sessions?q=ses-"), http.StatusNotFound, "No session has the id “ses-”.", `name="q" value="ses-"`)
	if !strings.Contains(body, `id="row-ses-wait"`) {
		t.Fatal("the page of a failed lookup does not list the sessions")
	}
	wantStatus(t, b.get("/ui/sessions?q=a+b"), http.StatusBadRequest, "q &#34;a b&#34; holds")
}

// A bad value is refused with the field named, before the API is asked.
func TestSessionsPage_BadFilterValues(t *testing.T) {
	api := sampleAPI()
	b := newBrowser(t, serveFake(t, api, Config{}))
	for _, c := range []struct{ query, msg string }{
		{"status=sleepy", `unknown status "sleepy"`},
		{"agent=bad+agent", `agent "bad agent"`},
		{"label=team", `label filter "team": write KEY=VALUE`},
		{"parent=a%2Fb", `parent "a/b" holds '/'`},
		{"forked_from=a..b", `forked_from "a..b" must not be`},
		{"created_since=yesterday", `created_since "yesterday": write a duration ago (1h, 30m), an RFC 3339 time`},
		{"created_before=2026-13-01", `created_before "2026-13-01": write a duration ago`},
		{"updated_since=-1h", `updated_since "-1h": a duration ago is more than zero`},
		{"updated_before=1969-12-31", `updated_before "1969-12-31": the time is not after 1970-01-01`},
		{"created_since=2026-01-02&created_before=2026-01-01", `created_since (2026-01-02) is not earlier than created_before (2026-01-01)`},
		{"updated_since=1h&updated_before=2h", `updated_since (1h) is not earlier than updated_before (2h)`},
		{"order=size", `order "size": use created or updated`},
		{"dir=up", `dir "up": use newest or oldest`},
	} {
		wantStatus(t, b.get("/ui/sessions?"+c.query), http.StatusBadRequest, html.EscapeString(c.msg))
	}
	if n := len(api.listRequests()); n != 0 {
		t.Fatalf("bad filters made %d ListSessions calls; want none", n)
	}
	// A token the API does not take is its refusal, in its words.
	wantStatus(t, b.get("/ui/sessions?token=garbage"), http.StatusBadRequest, "page_token: not a token of this list")
	wantStatus(t, b.get("/ui/nowhere"), http.StatusNotFound, "no such page")
}

func TestSessionPage_ShowsTimelineStepsAttemptsAndWaits(t *testing.T) {
	b := newBrowser(t, serveFake(t, sampleAPI(), Config{}))
	body := wantStatus(t, b.get("/ui/sessions/ses-wait"), http.StatusOK,
		"ship it", "model output", "deploying", "tool call", "result", "found x", "summary", "so far so good",
		"w-alpha", "rate_limit", "slow down", "w-beta",
		"Approve <code>deploy</code>?", "&#34;env&#34;: &#34;prod&#34;", ">Approve</button>", ">Deny</button>",
		"Which region?", `name="answer"`, "2023-11-14 22:13:20.000", `name="csrf"`,
		"leader <b>n1</b> at 127.0.0.1:7101",
	)
	if strings.Contains(body, "Reconcile") || strings.Contains(body, "Resume") {
		t.Fatal("a waiting session offers reconcile or resume")
	}
	wantStatus(t, b.get("/ui/sessions/ses-paused"), http.StatusOK, "Paused: limit", "rejected three times", "Resume (retry the turn)", "Resume (drop the turn)", "invalid_request: prompt too odd",
		"2 model calls, 3 tool calls, 400 input + 100 output tokens, cost 900", "with its children: 900 tokens, cost 1500", "max_tokens=1000 max_turns=5 loop_limit=3")
	wantStatus(t, b.get("/ui/sessions/ses-unknown"), http.StatusOK, "Did <code>send_email</code> happen?", "Reconcile", "outcome_unknown")

	wantStatus(t, b.get("/ui/sessions/ses-nope"), http.StatusNotFound, "session ses-nope not found")
}

func TestActions_GoThroughTheAPIAndRedirectBack(t *testing.T) {
	api := sampleAPI()
	b := newBrowser(t, serveFake(t, api, Config{}))
	b.get("/ui/sessions/ses-wait") // the CSRF cookie

	rec := b.post("/ui/sessions/ses-wait/deny", url.Values{"step": {"ses-wait/2"}, "reason": {"not on friday"}})
	wantStatus(t, rec, http.StatusSeeOther)
	if loc := rec.Header().Get("Location"); loc != "/ui/sessions/ses-wait?done=denied" {
		t.Fatalf("redirect to %q", loc)
	}
	wantStatus(t, b.get("/ui/sessions/ses-wait?done=denied"), http.StatusOK, "Denied: the model is told.")
	wantStatus(t, b.post("/ui/sessions/ses-wait/answer", url.Values{"step": {"ses-wait/3"}, "answer": {"eu-west"}}), http.StatusSeeOther)
	wantStatus(t, b.post("/ui/sessions/ses-paused/resume", url.Values{"choice": {"drop"}}), http.StatusSeeOther)
	wantStatus(t, b.post("/ui/sessions/ses-unknown/reconcile", url.Values{"step": {"ses-unknown/1"}, "outcome": {"failed"}, "note": {"bounced"}}), http.StatusSeeOther)
	want := []string{"deny ses-wait/2 not on friday", "answer ses-wait/3 eu-west", "resume ses-paused RESUME_CHOICE_DROP", "reconcile ses-unknown/1 OUTCOME_FAILED bounced"}
	if got := api.writes(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("writes %q; want %q", got, want)
	}

	// The API's refusal, with its own message: the approval was resolved.
	wantStatus(t, b.post("/ui/sessions/ses-wait/approve", url.Values{"step": {"ses-wait/2"}}), http.StatusConflict, "step ses-wait/2 is not waiting for this")
	wantStatus(t, b.post("/ui/sessions/ses-wait/resume", url.Values{}), http.StatusConflict, "session ses-wait is not paused or errored")
	if n := len(api.writes()); n != len(want) {
		t.Fatalf("%d writes; a refused action changed something", n)
	}
}

func TestActions_BadFormsAreRefusedAndChangeNothing(t *testing.T) {
	api := sampleAPI()
	b := newBrowser(t, serveFake(t, api, Config{}))
	b.get("/ui/sessions/ses-wait")
	cases := []struct {
		path string
		form url.Values
		code int
		msg  string
	}{
		{"/ui/sessions/ses-wait/answer", url.Values{"step": {"ses-wait/3"}, "answer": {"  "}}, http.StatusBadRequest, "the answer is empty"},
		{"/ui/sessions/ses-wait/approve", url.Values{}, http.StatusBadRequest, "approve needs the step of the wait"},
		{"/ui/sessions/ses-wait/approve", url.Values{"step": {"ses-paused/9"}}, http.StatusBadRequest, "step ses-paused/9 is not a step of session ses-wait"},
		{"/ui/sessions/ses-unknown/reconcile", url.Values{"step": {"ses-unknown/1"}, "outcome": {"maybe"}}, http.StatusBadRequest, "use succeeded or failed"},
		{"/ui/sessions/ses-paused/resume", url.Values{"choice": {"later"}}, http.StatusBadRequest, "use retry or drop"},
		{"/ui/sessions/ses-wait/explode", url.Values{}, http.StatusBadRequest, "unknown action"},
		{"/ui/sessions/ses-nope/approve", url.Values{"step": {"x"}}, http.StatusNotFound, "session ses-nope not found"},
		{"/ui/sessions/ses-wait/approve", url.Values{"step": {"ses-wait/2"}, "csrf": {""}}, http.StatusForbidden, "CSRF token is missing or stale"},
		{"/ui/sessions/ses-wait/approve", url.Values{"step": {"ses-wait/2"}, "csrf": {"0123456789abcdef0123456789abcdef"}}, http.StatusForbidden, "CSRF token is missing or stale"},
	}
	for _, c := range cases {
		wantStatus(t, b.post(c.path, c.form), c.code, html.EscapeString(c.msg))
	}
	// Another site's form: the browser says where it comes from.
	b.header.Set("Origin", "https://evil.example")
	wantStatus(t, b.post("/ui/sessions/ses-wait/approve", url.Values{"step": {"ses-wait/2"}}), http.StatusForbidden, "posted from another site")
	if w := api.writes(); len(w) != 0 {
		t.Fatalf("bad forms changed the state: %q", w)
	}
}

func TestACL_LoginCookieCarriesTheTokenAndTheAPIJudgesIt(t *testing.T) {
	api := sampleAPI()
	api.tokens = map[string]bool{"reader": false, "writer": true}
	b := newBrowser(t, serveFake(t, api, Config{ACL: true}))

	rec := b.get("/ui/sessions/ses-wait")
	wantStatus(t, rec, http.StatusSeeOther)
	if loc := rec.Header().Get("Location"); !strings.HasPrefix(loc, "/ui/login?next=") {
		t.Fatalf("no token: redirected to %q; want the login form", loc)
	}
	wantStatus(t, b.get("/ui/login?next=/ui/sessions/ses-wait"), http.StatusOK, `name="token"`)
	wantStatus(t, b.post("/ui/login", url.Values{"token": {""}, "next": {"/ui/sessions"}}), http.StatusBadRequest, "the token is empty")
	wantStatus(t, b.post("/ui/login", url.Values{"token": {"wrong"}, "next": {"https://evil.example/"}}), http.StatusSeeOther)
	wantStatus(t, b.get("/ui/sessions"), http.StatusUnauthorized, "unknown token")

	rec = b.post("/ui/login", url.Values{"token": {"reader"}, "next": {"/ui/sessions/ses-wait"}})
	if loc := rec.Header().Get("Location"); loc != "/ui/sessions/ses-wait" {
		t.Fatalf("login redirected to %q", loc)
	}
	if c := b.cookies[tokenCookie]; c == nil || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode {
		t.Fatalf("token cookie %+v; want HttpOnly and SameSite=Strict", c)
	}
	wantStatus(t, b.get("/ui/sessions/ses-wait"), http.StatusOK, "Which region?", "Log out")
	wantStatus(t, b.post("/ui/sessions/ses-wait/approve", url.Values{"step": {"ses-wait/2"}}), http.StatusForbidden, "a reader token may not call this")

	// An Authorization header works as well as the cookie.
	delete(b.cookies, tokenCookie)
	b.header.Set("Authorization", "Bearer writer")
	wantStatus(t, b.post("/ui/sessions/ses-wait/approve", url.Values{"step": {"ses-wait/2"}}), http.StatusSeeOther)
	if w := api.writes(); len(w) != 1 || !strings.HasPrefix(w[0], "approve ses-wait/2") {
		t.Fatalf("writes %q; want the writer's approval only", w)
	}
	b.header.Del("Authorization")
	b.cookies[tokenCookie] = &http.Cookie{Name: tokenCookie, Value: "writer"}
	wantStatus(t, b.post("/ui/logout", url.Values{}), http.StatusSeeOther)
	if _, ok := b.cookies[tokenCookie]; ok {
		t.Fatal("logout kept the token cookie")
	}
}

func TestEvents_StreamTheWatchAsServerSentEvents(t *testing.T) {
	api := sampleAPI()
	api.events["ses-wait"] = []*dexv1.Event{
		{Seq: 1, SessionId: "ses-wait", Type: "message_accepted"},
		{Seq: 2, SessionId: "ses-wait", Type: "step_waiting", StepId: "ses-wait/2"},
		{SessionId: "ses-wait", Type: "output", StepId: "ses-wait-s1", Output: &dexv1.OutputDelta{Attempt: 1, Offset: 0, Text: "Hel<lo"}},
	}
	b := newBrowser(t, serveFake(t, api, Config{}))
	b.header.Set("Last-Event-ID", "1")
	rec := b.get("/ui/sessions/ses-wait/events")
	body := wantStatus(t, rec, http.StatusOK, "retry: 1000", "id: 2\nevent: dex\n", `"type":"step_waiting"`,
		"event: output\ndata: {\"attempt\":1,\"offset\":0,\"step\":\"ses-wait-s1\",\"text\":\"Hel\\u003clo\",\"type\":\"output\"}\n")
	if strings.Contains(body, "message_accepted") {
		t.Fatal("the stream repeated an event before Last-Event-ID")
	}
	if ct := rec.Header().Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	b.header.Del("Last-Event-ID")
	wantStatus(t, b.get("/ui/sessions/ses-nope/events"), http.StatusOK, "event: fail", `"gone":true`, "session ses-nope not found")
	wantStatus(t, b.get("/ui/sessions/ses-wait/events?after=x"), http.StatusBadRequest, "is not an event seq")
}

func TestClusterPage_NodesWorkersAndQueues(t *testing.T) {
	b := newBrowser(t, serveFake(t, sampleAPI(), Config{}))
	wantStatus(t, b.get("/ui/cluster"), http.StatusOK,
		"Leader <b>n1</b>", "term 3", "epoch 7", "not ready: not the leader", "unreachable",
		"w-alpha", "<code>deploy</code> idempotent_write · needs approval · 3 attempts", "2023-11-14 22:13:20.000",
		"<td><code>deploy</code></td><td>4</td><td>1</td>")
}

func TestChaosPage_ShowsTheMatrix(t *testing.T) {
	dir := t.TempDir()
	b := newBrowser(t, serveFake(t, sampleAPI(), Config{ChaosReport: dir}))
	wantStatus(t, b.get("/ui/chaos"), http.StatusOK, "no matrix report to show")

	matrix := `{"cells": [
	  {"step": "CallTool", "moment": "after-claim", "column": "kill-worker", "result": "pass", "seconds": 3.2},
	  {"step": "CallTool", "moment": "after-claim", "column": "kill-leader", "result": "fail", "reason": "ran twice", "seconds": 9.5},
	  {"step": "AwaitTimer", "moment": "waiting", "column": "kill-worker", "result": "n/a"}],
	  "summary": {"pass": 1, "fail": 1, "na": 1, "total": 3, "wall_seconds": 12.7}}`
	if err := os.WriteFile(filepath.Join(dir, "matrix.json"), []byte(matrix), 0o644); err != nil {
		t.Fatal(err)
	}
	body := wantStatus(t, b.get("/ui/chaos"), http.StatusOK, "<th>kill-worker</th><th>kill-leader</th>",
		"pass 3.2s", `title="ran twice">FAIL 9.5s`, ">n/a<", "<b>1</b> pass, <b>1</b> fail, 1 n/a of 3")
	if !strings.Contains(body, `<td>AwaitTimer</td><td>waiting</td><td class="cell cell-na"`) {
		t.Fatal("the n/a row is not laid out by column")
	}

	if err := os.WriteFile(filepath.Join(dir, "matrix.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, b.get("/ui/chaos"), http.StatusOK, "is not a matrix report")
	nb := newBrowser(t, serveFake(t, sampleAPI(), Config{}))
	wantStatus(t, nb.get("/ui/chaos"), http.StatusOK, "--chaos-report DIR")
}

func TestStaticAndSecurityHeaders(t *testing.T) {
	b := newBrowser(t, serveFake(t, sampleAPI(), Config{}))
	rec := b.get("/ui/static/console.js")
	wantStatus(t, rec, http.StatusOK, "EventSource")
	rec = b.get("/ui/sessions")
	if rec.Header().Get("X-Frame-Options") != "DENY" || !strings.Contains(rec.Header().Get("Content-Security-Policy"), "default-src 'self'") {
		t.Fatalf("headers %v", rec.Header())
	}
	if loc := b.get("/ui/").Header().Get("Location"); loc != "/ui/sessions" {
		t.Fatalf("/ui/ redirects to %q", loc)
	}
}

// A long session's folded turns are listed under its Steps, newest first,
// with what each kept: its Steps and attempts, by kind, and its outcome.
func TestSessionPage_ListsFoldedTurns(t *testing.T) {
	api := newFakeAPI()
	api.add(&dexv1.Session{Id: "ses-long", Status: dexv1.SessionStatus_SESSION_STATUS_IDLE, TurnsCompleted: 3, FoldedThroughTurn: 2, FoldedSteps: 4},
		&dexv1.Step{Id: "ses-long-s5", Number: 5, Turn: 3, Kind: dexv1.StepKind_STEP_KIND_RUN_MODEL, Status: dexv1.StepStatus_STEP_STATUS_DONE, Outcome: dexv1.Outcome_OUTCOME_SUCCEEDED})
	api.add(&dexv1.Session{Id: "ses-short", Status: dexv1.SessionStatus_SESSION_STATUS_IDLE, TurnsCompleted: 1})
	api.mu.Lock()
	api.sessions["ses-long"].FoldedTurns = []*dexv1.FoldedTurn{
		{SessionId: "ses-long", Turn: 1, Steps: 3, Attempts: 4, FirstStep: 1, LastStep: 3, LastOutcome: dexv1.Outcome_OUTCOME_SUCCEEDED, Kinds: []*dexv1.FoldedKind{
			{Kind: dexv1.StepKind_STEP_KIND_RUN_MODEL, Steps: 2, Attempts: 3}, {Kind: dexv1.StepKind_STEP_KIND_CALL_TOOL, Tool: "grep", Steps: 1, Attempts: 1}}},
		{SessionId: "ses-long", Turn: 2, Steps: 1, Attempts: 1, FirstStep: 4, LastStep: 4, LastOutcome: dexv1.Outcome_OUTCOME_FAILED,
			LastErrorType: dexv1.ErrorType_ERROR_TYPE_RATE_LIMIT, FailedSteps: 1, Kinds: []*dexv1.FoldedKind{{Kind: dexv1.StepKind_STEP_KIND_RUN_MODEL, Steps: 1, Attempts: 1}}},
	}
	api.mu.Unlock()
	b := newBrowser(t, serveFake(t, api, Config{}))
	body := wantStatus(t, b.get("/ui/sessions/ses-long"), http.StatusOK,
		"Folded turns", "turns 1 to 2 were folded (4 Steps)", `id="folded-1"`, `id="folded-2"`,
		"<code>grep</code> · 1 · 1", "#1–3", "rate_limit", "1 failed", "ses-long-s5")
	if strings.Index(body, `id="folded-2"`) > strings.Index(body, `id="folded-1"`) {
		t.Fatal("folded turns are not listed newest first")
	}
	if !strings.Contains(wantStatus(t, b.get("/ui/sessions/ses-long"), http.StatusOK), "run_model · 2 · 3") {
		t.Fatal("the folded turn's kinds are not shown")
	}
	if strings.Contains(wantStatus(t, b.get("/ui/sessions/ses-short"), http.StatusOK), "Folded turns") {
		t.Fatal("a session without folded turns shows the section")
	}
}

// The schedules page lists each schedule with its spec, state, slots and
// counts, and links the session of its last slot.
func TestSchedulesPage_ListsTheSchedules(t *testing.T) {
	api := sampleAPI()
	b := newBrowser(t, serveFake(t, api, Config{}))
	wantStatus(t, b.get("/ui/schedules"), http.StatusOK, "No schedule.")
	api.mu.Lock()
	api.schedules = []*dexv1.Schedule{
		{Id: "nightly", Cron: "0 2 * * *", TimeZone: "Europe/Paris", NextSlotMs: 1_700_000_000_000, LastSlotMs: 1_699_913_600_000,
			LastOutcome: dexv1.ScheduleSlotOutcome_SCHEDULE_SLOT_OUTCOME_STARTED, LastSessionId: "nightly-1699913600000",
			Overlap: dexv1.ScheduleOverlap_SCHEDULE_OVERLAP_QUEUE_ONE, CatchUp: dexv1.ScheduleCatchUp_SCHEDULE_CATCH_UP_LATEST, Started: 12, SkippedMissed: 2},
		{Id: "tick", IntervalMs: 30_000, Paused: true, Overlap: dexv1.ScheduleOverlap_SCHEDULE_OVERLAP_SKIP, CatchUp: dexv1.ScheduleCatchUp_SCHEDULE_CATCH_UP_SKIP},
	}
	api.mu.Unlock()
	wantStatus(t, b.get("/ui/schedules"), http.StatusOK,
		`<code>0 2 * * * (Europe/Paris)</code>`, "2023-11-14 22:13:20.000", `<a href="/ui/sessions/nightly-1699913600000">`,
		"<td>queue_one</td><td>latest</td><td>12</td><td>0</td><td>2</td>",
		"<code>every 30s</code></td><td>paused</td>\n<td>—</td>")
}
