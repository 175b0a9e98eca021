package console

import (
	"net/http"
	"strings"
	"testing"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// The session page shows the session's dispatch order, its defaults filled
// in, and its provider, by its usage and budget.
func TestSessionPage_ShowsDispatchOrderAndProvider(t *testing.T) {
	api := newFakeAPI()
	api.add(&dexv1.Session{Id: "ses-ordered", Status: dexv1.SessionStatus_SESSION_STATUS_IDLE, Priority: 5, FairnessKey: "team-a", FairnessWeight: 20, Provider: "openai"})
	api.add(&dexv1.Session{Id: "ses-plain", Status: dexv1.SessionStatus_SESSION_STATUS_IDLE})
	b := newBrowser(t, serveFake(t, api, Config{}))
	body := wantStatus(t, b.get("/ui/sessions/ses-ordered"), http.StatusOK,
		`<dd id="dispatch">priority 5 · fairness key <code>team-a</code>, weight 20</dd>`, `<dd id="provider"><code>openai</code></dd>`)
	if strings.Index(body, `id="budget"`) > strings.Index(body, `id="dispatch"`) {
		t.Fatal("the dispatch order is not shown after the budget")
	}
	wantStatus(t, b.get("/ui/sessions/ses-plain"), http.StatusOK,
		`<dd id="dispatch">priority 3 · <span class="muted">no fairness key</span></dd>`, `<dd id="provider"><span class="muted">none</span></dd>`)
}

// The cluster page lists the providers: their limits, the model Steps
// running and throttled, and a hold with its end and Step.
func TestClusterPage_ShowsProviders(t *testing.T) {
	api := sampleAPI()
	until := time.Now().Add(time.Hour).UnixMilli()
	api.status = &dexv1.StatusResponse{Leader: "n1", AnsweredBy: "n1", Nodes: []*dexv1.NodeStatus{{Id: "n1", State: "leader"}},
		Providers: []*dexv1.ProviderStatus{
			{Provider: "openai", MaxConcurrent: 8, CallsPerMinute: 600, TokensPerMinute: 2_000_000, Running: 3, Throttled: 5,
				Hold: &dexv1.ProviderHold{Provider: "openai", UntilMs: until, StepId: "s1-s4"}},
			{Provider: "anthropic", Running: 1},
		}}
	b := newBrowser(t, serveFake(t, api, Config{}))
	body := wantStatus(t, b.get("/ui/cluster"), http.StatusOK,
		"<h2>Providers</h2>",
		"<td><code>openai</code></td><td>8 at once · 600 calls/min · 2000000 tokens/min</td><td>3</td><td>5</td><td>until "+fmtMs(until)+" (",
		"left) · set by Step s1-s4</td>",
		"<td><code>anthropic</code></td><td>none</td><td>1</td><td>0</td><td>—</td>")
	if strings.Count(body, "<td><code>openai</code></td>") != 1 {
		t.Fatal("the provider is listed more than once")
	}

	// No provider to show: no section.
	api.status.Providers = nil
	if body := wantStatus(t, b.get("/ui/cluster"), http.StatusOK, "Leader <b>n1</b>"); strings.Contains(body, "Providers") {
		t.Fatal("the cluster page shows a providers section with no provider")
	}
}
