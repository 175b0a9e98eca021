package console

import (
	"net/http"
	"slices"
	"testing"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// Each row says how the session began and what it waits for now.
func TestSessionsPage_ShowsFirstMessageAndWhatEachWaitsFor(t *testing.T) {
	api := newFakeAPI()
	api.add(&dexv1.Session{Id: "ses-wait", Status: dexv1.SessionStatus_SESSION_STATUS_WAITING, CreatedAtMs: 4000,
		History: []*dexv1.HistoryEntry{{Seq: 1, Kind: dexv1.HistoryKind_HISTORY_KIND_USER, Text: "ship it\nto prod please"}},
		Turn: &dexv1.Turn{Number: 1, Calls: []*dexv1.CallState{
			{CallId: "c1", Tool: "deploy", Phase: dexv1.CallPhase_CALL_PHASE_AWAITING_APPROVAL},
			{CallId: "c2", Tool: "ask_user", Builtin: "ask_user", Phase: dexv1.CallPhase_CALL_PHASE_WAITING, Arguments: `{"question": "Which region?"}`},
			{CallId: "c0", Tool: "lookup", Phase: dexv1.CallPhase_CALL_PHASE_DONE},
		}}})
	api.add(&dexv1.Session{Id: "ses-tool", Status: dexv1.SessionStatus_SESSION_STATUS_RUNNING, CreatedAtMs: 3000,
		Turn: &dexv1.Turn{Number: 1, Calls: []*dexv1.CallState{{CallId: "c1", Tool: "fetch", Phase: dexv1.CallPhase_CALL_PHASE_RUNNING}}}})
	api.add(&dexv1.Session{Id: "ses-idle", Status: dexv1.SessionStatus_SESSION_STATUS_IDLE, CreatedAtMs: 2000,
		Inbox: []*dexv1.Message{{Id: "m1", Text: "queued first"}}})
	api.add(&dexv1.Session{Id: "ses-paused", Status: dexv1.SessionStatus_SESSION_STATUS_PAUSED, CreatedAtMs: 1000, PauseReason: dexv1.PauseReason_PAUSE_REASON_LIMIT})
	api.add(&dexv1.Session{Id: "ses-err", Status: dexv1.SessionStatus_SESSION_STATUS_ERRORED, CreatedAtMs: 500, ResumeAtMs: time.Now().Add(90 * time.Second).UnixMilli()})
	b := newBrowser(t, serveFake(t, api, Config{}))
	wantStatus(t, b.get("/ui/sessions"), http.StatusOK,
		"<th>First message</th><th>Waits for</th>",
		`<td class="first">ship it …</td><td class="waits-for">approval of deploy, an answer: &#34;Which region?&#34;</td>`,
		`<td class="waits-for">tool fetch</td>`,
		`<td class="first">queued first</td><td class="waits-for">a message</td>`,
		`<td class="waits-for">a resume (limit)</td>`,
		`<td class="waits-for">a resume; the cluster retries in 1m2`, // 1m29s or 1m30s
		"1970-01-01 00:00:04.000 UTC", "ago</span>")
	// The first messages and the waits of the sessions at rest come with
	// the list; only the sessions in a turn are read for their waits.
	got := api.gotSessions()
	slices.Sort(got)
	if !slices.Equal(got, []string{"ses-tool", "ses-wait"}) {
		t.Fatalf("GetSession asked for %v; want only the running and the waiting session", got)
	}
}

func TestTimes_NameTheZoneAndSayHowLong(t *testing.T) {
	if got := fmtMs(1_700_000_000_000); got != "2023-11-14 22:13:20.000 UTC" {
		t.Fatalf("fmtMs: %q", got)
	}
	now := time.Now()
	for _, c := range []struct {
		at   time.Time
		want string
	}{
		{now.Add(-3 * time.Second), "3s ago"}, {now.Add(-(4*time.Minute + 5*time.Second)), "4m05s ago"},
		{now.Add(-(26 * time.Hour)), "1d2h ago"}, {now.Add(2*time.Hour + 10*time.Minute + time.Second), "in 2h10m"},
		{now, "just now"},
	} {
		if got := agoMs(c.at.UnixMilli()); got != c.want {
			t.Errorf("agoMs(%v): %q; want %q", now.Sub(c.at), got, c.want)
		}
	}
	if agoMs(0) != "" || tookMs(0, 5) != "" || tookMs(10, 5) != "" {
		t.Fatal("a time not set shows a duration")
	}
	if got := tookMs(1000, 1250); got != "250ms" {
		t.Fatalf("tookMs: %q", got)
	}
	if got := tookMs(1000, 1000+75_000); got != "1m15s" {
		t.Fatalf("tookMs: %q", got)
	}
	if got := tookMs(now.Add(-2*time.Second).UnixMilli(), 0); got != "running 2s" {
		t.Fatalf("tookMs of a running attempt: %q", got)
	}
	if got := firstLine(5, "abcdefgh"); got != "abcde…" {
		t.Fatalf("firstLine: %q", got)
	}
}

func TestSessionPage_AttemptsSayHowLongTheyTook(t *testing.T) {
	b := newBrowser(t, serveFake(t, sampleAPI(), Config{}))
	wantStatus(t, b.get("/ui/sessions/ses-wait"), http.StatusOK, `<span class="muted">(100ms)</span> · failed`, "1970-01-01 00:00:01.300 UTC")
}
