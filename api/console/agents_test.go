package console

import (
	"net/http"
	"strings"
	"testing"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

const unservedBot2 = `no live Worker serves agent "bot@2" (its model)`

func agentsAPI() *fakeAPI {
	api := newFakeAPI()
	api.add(&dexv1.Session{Id: "ses-bot", Agent: "bot@2", Status: dexv1.SessionStatus_SESSION_STATUS_RUNNING, CreatedAtMs: 2000},
		&dexv1.Step{Id: "ses-bot/1", Number: 1, Turn: 1, Kind: dexv1.StepKind_STEP_KIND_RUN_MODEL, Status: dexv1.StepStatus_STEP_STATUS_QUEUED,
			WaitingReason: unservedBot2})
	api.add(&dexv1.Session{Id: "ses-plain", Status: dexv1.SessionStatus_SESSION_STATUS_RUNNING, CreatedAtMs: 1000},
		&dexv1.Step{Id: "ses-plain/1", Number: 1, Turn: 1, Kind: dexv1.StepKind_STEP_KIND_RUN_MODEL, Status: dexv1.StepStatus_STEP_STATUS_QUEUED})
	return api
}

// escaped is how html/template writes text with quotes.
func escaped(s string) string { return strings.ReplaceAll(s, `"`, "&#34;") }

func TestSessionPage_ShowsTheAgentAndWhyAStepIsNotHandedOut(t *testing.T) {
	b := newBrowser(t, serveFake(t, agentsAPI(), Config{}))
	wantStatus(t, b.get("/ui/sessions/ses-bot"), http.StatusOK,
		`<dt>Agent</dt><dd id="agent"><code>bot@2</code></dd>`,
		`<dt>Not handed out</dt>`, "Step ses-bot/1 (run_model) waits: "+escaped(unservedBot2),
		`<span class="waiting-reason">`+escaped(unservedBot2)+`</span>`)
	body := wantStatus(t, b.get("/ui/sessions/ses-plain"), http.StatusOK, `<dd id="agent"><span class="muted">the default agent</span></dd>`)
	if strings.Contains(body, "Not handed out") || strings.Contains(body, "waiting-reason") {
		t.Fatal("a queued Step with no waiting reason is shown as not handed out")
	}
}

func TestSessionsPage_HasAnAgentColumn(t *testing.T) {
	b := newBrowser(t, serveFake(t, agentsAPI(), Config{}))
	wantStatus(t, b.get("/ui/sessions"), http.StatusOK,
		"<th>Agent</th>", `<td class="waits-for">the model</td><td>0</td><td></td><td class="agent">bot@2</td>`,
		`<td class="waits-for">the model</td><td>0</td><td></td><td class="agent">-</td>`)
}

func TestClusterPage_ShowsTheAgentsOfEachWorker(t *testing.T) {
	b := newBrowser(t, serveFake(t, agentsAPI(), Config{}))
	wantStatus(t, b.get("/ui/cluster"), http.StatusOK,
		"<th>Model of agents</th>",
		`<td class="agents"><code>bot@1</code>, <code>bot@2</code></td>`,
		`<td class="agents">the default agent</td>`,
		`<td class="agents">no model</td>`,
		"<code>search</code> read · only for <code>bot@1</code>")
}
