package console

import (
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

func TestSchedules_CreateCronAndInterval(t *testing.T) {
	api := newFakeAPI()
	b := newBrowser(t, serveFake(t, api, Config{}))
	wantStatus(t, b.get("/ui/schedules"), http.StatusOK, `id="scheduleform"`, `name="cron"`, `name="zone"`, `name="every"`, `name="overlap"`, `name="catchup"`, `name="csrf"`)
	wantRedirect(t, b.post("/ui/schedules", url.Values{"id": {"nightly"}, "cron": {"0 2 * * *"}, "zone": {"Europe/Paris"}, "agent": {"bot@2"},
		"message": {"Summarise the tickets"}, "labels": {"team=support\nenv = prod"}, "overlap": {"queue_one"}, "catchup": {"latest"}}),
		"/ui/schedules?done=created#schedule-nightly")
	wantRedirect(t, b.post("/ui/schedules", url.Values{"id": {"tick"}, "every": {"90s"}, "message": {"check"}, "paused": {"yes"}}),
		"/ui/schedules?done=created#schedule-tick")
	wantWrites(t, api,
		"schedule nightly cron=0 2 * * * zone=Europe/Paris every=0ms agent=bot@2 labels=team=support,env=prod message=Summarise the tickets overlap=SCHEDULE_OVERLAP_QUEUE_ONE catchup=SCHEDULE_CATCH_UP_LATEST paused=false",
		"schedule tick cron= zone= every=90000ms agent= labels= message=check overlap=SCHEDULE_OVERLAP_SKIP catchup=SCHEDULE_CATCH_UP_SKIP paused=true")
	wantStatus(t, b.get("/ui/schedules?done=created"), http.StatusOK, "Schedule created.", "<code>0 2 * * * (Europe/Paris)</code>", "<code>every 1m30s</code>",
		`action="/ui/schedules/tick/resume"`, `action="/ui/schedules/nightly/pause"`, `href="/ui/sessions?label=dex.schedule%3Dnightly"`)
}

func TestSchedules_BadInputChangesNothing(t *testing.T) {
	api := newFakeAPI()
	api.schedules = []*dexv1.Schedule{{Id: "taken", IntervalMs: 60_000}}
	b := newBrowser(t, serveFake(t, api, Config{}))
	b.get("/ui/schedules")
	cases := []struct {
		form url.Values
		code int
		msg  string
	}{
		// The form's refusals.
		{url.Values{"cron": {"@hourly"}}, http.StatusBadRequest, "schedule id is required"},
		{url.Values{"id": {"a/b"}, "cron": {"@hourly"}}, http.StatusBadRequest, `schedule id "a/b"`},
		{url.Values{"id": {"s"}}, http.StatusBadRequest, "give a cron expression (with its time zone) or an interval"},
		{url.Values{"id": {"s"}, "cron": {"@hourly"}, "every": {"1m"}}, http.StatusBadRequest, "a cron expression or an interval, not both"},
		{url.Values{"id": {"s"}, "every": {"0s"}}, http.StatusBadRequest, "interval 0s: it must be longer than 0"},
		{url.Values{"id": {"s"}, "every": {"-5m"}}, http.StatusBadRequest, "interval -5m: it must be longer than 0"},
		{url.Values{"id": {"s"}, "every": {"soon"}}, http.StatusBadRequest, `interval "soon": write a duration such as 30s`},
		{url.Values{"id": {"s"}, "every": {"1m"}, "zone": {"UTC"}}, http.StatusBadRequest, "a time zone is for a cron expression"},
		{url.Values{"id": {"s"}, "every": {"1m"}, "labels": {"team"}}, http.StatusBadRequest, `label "team": write KEY=VALUE`},
		{url.Values{"id": {"s"}, "every": {"1m"}, "labels": {"a=1\na=2"}}, http.StatusBadRequest, `label "a" is given twice`},
		{url.Values{"id": {"s"}, "every": {"1m"}, "agent": {"bad agent"}}, http.StatusBadRequest, `agent "bad agent"`},
		{url.Values{"id": {"s"}, "every": {"1m"}, "overlap": {"sometimes"}}, http.StatusBadRequest, `overlap policy "sometimes": use skip, queue_one or allow`},
		{url.Values{"id": {"s"}, "every": {"1m"}, "catchup": {"never"}}, http.StatusBadRequest, `catch-up policy "never": use skip, latest or all`},
		{url.Values{"id": {"s"}, "every": {"1m"}, "csrf": {""}}, http.StatusForbidden, "CSRF token is missing or stale"},
		// The API's refusals, in its words.
		{url.Values{"id": {"s"}, "cron": {"61 * * * *"}, "message": {"keep me"}}, http.StatusBadRequest, `bad cron expression "61 * * * *"`},
		{url.Values{"id": {"s"}, "cron": {"@daily"}, "zone": {"Mars/Olympus"}}, http.StatusBadRequest, `unknown time zone "Mars/Olympus"`},
		{url.Values{"id": {"s"}, "every": {"500ms"}}, http.StatusBadRequest, "the interval must be at least 1s"},
		{url.Values{"id": {"s"}, "every": {"1m"}, "labels": {"Team=x"}}, http.StatusBadRequest, `label key "Team": only a-z`},
		{url.Values{"id": {"taken"}, "every": {"1m"}}, http.StatusConflict, `schedule "taken" already exists`},
	}
	for _, c := range cases {
		body := wantStatus(t, b.post("/ui/schedules", c.form), c.code, html.EscapeString(c.msg))
		// The form comes back as typed.
		if m := c.form.Get("message"); m != "" && !strings.Contains(body, ">"+m+"</textarea>") {
			t.Fatalf("the refused form lost its message %q:\n%s", m, body)
		}
		if m := c.form.Get("cron"); m != "" && !strings.Contains(body, `name="cron" value="`+html.EscapeString(m)+`"`) {
			t.Fatalf("the refused form lost its cron %q", m)
		}
	}
	wantWrites(t, api)
	if len(api.schedules) != 1 {
		t.Fatalf("the refusals made schedules: %v", api.schedules)
	}
}

func TestSchedules_PauseResumeTriggerDelete(t *testing.T) {
	api := newFakeAPI()
	api.schedules = []*dexv1.Schedule{{Id: "tick", IntervalMs: 60_000, Labels: []*dexv1.Label{{Key: "team", Value: "ops"}}}}
	b := newBrowser(t, serveFake(t, api, Config{}))
	wantStatus(t, b.get("/ui/schedules"), http.StatusOK, `action="/ui/schedules/tick/pause"`, `action="/ui/schedules/tick/trigger"`, `action="/ui/schedules/tick/delete"`)
	wantRedirect(t, b.post("/ui/schedules/tick/pause", url.Values{}), "/ui/schedules?done=paused#schedule-tick")
	wantStatus(t, b.get("/ui/schedules?done=paused"), http.StatusOK, "Paused: no slot starts", "<td>paused</td>", `action="/ui/schedules/tick/resume"`)
	wantRedirect(t, b.post("/ui/schedules/tick/resume", url.Values{}), "/ui/schedules?done=resumed#schedule-tick")
	wantRedirect(t, b.post("/ui/schedules/tick/trigger", url.Values{}), "/ui/schedules?done=triggered&session=tick-10001#schedule-tick")
	wantStatus(t, b.get("/ui/schedules?done=triggered&session=tick-10001"), http.StatusOK, "Triggered: one session started now", `<a href="/ui/sessions/tick-10001">tick-10001</a>`)
	wantStatus(t, b.get("/ui/sessions?label=dex.schedule%3Dtick"), http.StatusOK, "tick-10001", "team=ops")

	// Delete asks for the box.
	wantStatus(t, b.post("/ui/schedules/tick/delete", url.Values{}), http.StatusBadRequest, "tick “delete schedule tick” to delete it")
	wantRedirect(t, b.post("/ui/schedules/tick/delete", url.Values{"confirm": {"yes"}}), "/ui/schedules?done=deleted")
	wantStatus(t, b.get("/ui/schedules?done=deleted"), http.StatusOK, "Deleted: the sessions it started stay.", "No schedule.")
	wantWrites(t, api, "schedule tick paused=true", "schedule tick paused=false", "trigger tick started tick-10001", "delete schedule tick")

	wantStatus(t, b.post("/ui/schedules/gone/pause", url.Values{}), http.StatusNotFound, `schedule &#34;gone&#34; not found`)
	wantStatus(t, b.post("/ui/schedules/gone/trigger", url.Values{}), http.StatusNotFound, `schedule &#34;gone&#34; not found`)
	wantStatus(t, b.post("/ui/schedules/gone/delete", url.Values{"confirm": {"yes"}}), http.StatusNotFound, `schedule &#34;gone&#34; not found`)
	wantStatus(t, b.post("/ui/schedules/gone/explode", url.Values{}), http.StatusBadRequest, `unknown schedule action &#34;explode&#34;`)
	wantStatus(t, b.post("/ui/schedules/gone/pause", url.Values{"csrf": {""}}), http.StatusForbidden, "CSRF token is missing or stale")
	wantWrites(t, api, "schedule tick paused=true", "schedule tick paused=false", "trigger tick started tick-10001", "delete schedule tick")
}

// A reader sees the schedules but no form; one posted anyway is the API's
// refusal.
func TestSchedules_ReaderToken(t *testing.T) {
	api := newFakeAPI()
	api.tokens = map[string]bool{"reader": false, "writer": true}
	api.schedules = []*dexv1.Schedule{{Id: "tick", IntervalMs: 60_000}}
	b := newBrowser(t, serveFake(t, api, Config{ACL: true}))
	b.cookies[tokenCookie] = &http.Cookie{Name: tokenCookie, Value: "reader"}
	body := wantStatus(t, b.get("/ui/schedules"), http.StatusOK, "tick", "may read schedules but not change them")
	if strings.Contains(body, `id="scheduleform"`) || strings.Contains(body, `/ui/schedules/tick/`) {
		t.Fatal("a reader's Schedules page offers a form")
	}
	wantStatus(t, b.post("/ui/schedules", url.Values{"id": {"s"}, "every": {"1m"}}), http.StatusForbidden, "a reader token may not call this")
	wantStatus(t, b.post("/ui/schedules/tick/trigger", url.Values{}), http.StatusForbidden, "a reader token may not call this")
	wantStatus(t, b.post("/ui/schedules/tick/delete", url.Values{"confirm": {"yes"}}), http.StatusForbidden, "a reader token may not call this")
	wantWrites(t, api)
	b.cookies[tokenCookie] = &http.Cookie{Name: tokenCookie, Value: "writer"}
	wantStatus(t, b.get("/ui/schedules"), http.StatusOK, `id="scheduleform"`, `action="/ui/schedules/tick/trigger"`)
}
