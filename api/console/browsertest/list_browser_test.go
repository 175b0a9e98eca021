//go:build e2e

package browsertest

import (
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// listFiltersInBrowser filters the sessions list through its form by
// agent, by label and by creation time, against the real cluster's
// ListSessions, and checks the first message a row shows. since is a
// time after every session but ses-agent was created.
func listFiltersInBrowser(t *testing.T, base string, since time.Time,
	run func(string, ...chromedp.Action), text func(string) string, shot func(string) chromedp.Action) {
	t.Helper()
	rows := func() []string {
		var ids []string
		run("read the rows", chromedp.Evaluate(`[...document.querySelectorAll('#sessions tbody tr[id^="row-"]')].map(r => r.id.slice(4))`, &ids))
		slices.Sort(ids)
		return ids
	}
	filter := func(what, field, value string) []string {
		t.Helper()
		run(what, chromedp.Navigate(base+"/ui/sessions"), chromedp.WaitVisible(`#filterform`, chromedp.ByQuery),
			chromedp.SendKeys(`#filterform input[name="`+field+`"]`, value, chromedp.ByQuery),
			chromedp.Submit(`#filterform input[name="`+field+`"]`, chromedp.ByQuery),
			chromedp.WaitReady(`#filterform input[name="`+field+`"][value="`+value+`"]`, chromedp.ByQuery),
			chromedp.WaitVisible(`#sessions`, chromedp.ByQuery))
		return rows()
	}

	// Every row shows how its session began, from the list itself.
	run("the list", chromedp.Navigate(base+"/ui/sessions"), chromedp.WaitVisible(`#row-ses-approve`, chromedp.ByQuery))
	if s := text(`#row-ses-approve td.first`); s != "deploy to prod" {
		t.Fatalf("ses-approve's row shows the first message %q; want deploy to prod", s)
	}
	all := rows()
	if !slices.Contains(all, "ses-agent") || !slices.Contains(all, "ses-deny") {
		t.Fatalf("the unfiltered list shows %v", all)
	}

	if got := filter("filter by agent", "agent", "bot@9"); !slices.Equal(got, []string{"ses-agent"}) {
		t.Fatalf("the list filtered by agent bot@9 shows %v; want ses-agent alone", got)
	}
	if got := filter("filter by label", "label", "team=bots"); !slices.Equal(got, []string{"ses-agent"}) {
		t.Fatalf("the list filtered by label team=bots shows %v; want ses-agent alone", got)
	}
	at := since.UTC().Format("2006-01-02T15:04:05.000Z07:00")
	got := filter("filter by creation time", "created_since", at)
	run("screenshot", shot("sessions-filtered.png"))
	if !slices.Equal(got, []string{"ses-agent"}) {
		t.Fatalf("the list of sessions created since %s shows %v; want ses-agent alone", at, got)
	}
	if got := filter("filter by a duration ago", "created_since", "1h"); !slices.Equal(got, all) {
		t.Fatalf("the list of sessions created in the last hour shows %v; want all %v", got, all)
	}
}
