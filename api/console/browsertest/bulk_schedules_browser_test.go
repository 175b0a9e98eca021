//go:build e2e

package browsertest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// bulkInBrowser filters the list by a label, cancels every matching
// session's turn with one bulk job from the form, follows the job's page
// as it reloads itself until the job is done, and checks through the API
// that exactly the labelled sessions were cancelled.
func bulkInBrowser(t *testing.T, ctx context.Context, cl *client.Client, base string,
	run func(string, ...chromedp.Action), text func(string) string, shot func(string) chromedp.Action) {
	t.Helper()
	batch := []string{"ses-batch-1", "ses-batch-2", "ses-batch-3"}
	for _, id := range batch {
		if _, err := cl.CreateSession(ctx, &dexv1.CreateSessionRequest{SessionId: id, Message: "ask me", Labels: []*dexv1.Label{{Key: "batch", Value: "nightly"}}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cl.CreateSession(ctx, &dexv1.CreateSessionRequest{SessionId: "ses-unbatched", Message: "ask me"}); err != nil {
		t.Fatal(err)
	}
	for _, id := range append(batch, "ses-unbatched") {
		waitStatus(t, ctx, cl, id, dexv1.SessionStatus_SESSION_STATUS_WAITING)
	}

	run("filter by the label", chromedp.Navigate(base+"/ui/sessions"), chromedp.WaitVisible(`#filterform`, chromedp.ByQuery),
		chromedp.SendKeys(`#filterform input[name="label"]`, "batch=nightly", chromedp.ByQuery),
		chromedp.Submit(`#filterform input[name="label"]`, chromedp.ByQuery),
		// Only the filtered page's form carries the label.
		chromedp.WaitReady(`#bulkform input[name="label"][value="batch=nightly"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#bulkfilter`, chromedp.ByQuery))
	if f := text(`#bulkfilter`); f != "label batch=nightly" {
		t.Fatalf("the bulk form acts on %q; want label batch=nightly", f)
	}
	if rows := text(`#sessions`); strings.Contains(rows, "ses-unbatched") || !strings.Contains(rows, "ses-batch-2") {
		t.Fatalf("the filtered list reads %q", rows)
	}
	run("start a bulk cancel", chromedp.SetValue(`#bulkform select[name="action"]`, "cancel", chromedp.ByQuery),
		chromedp.SendKeys(`#bulkform input[name="reason"]`, "batch stopped", chromedp.ByQuery), shot("bulk-form.png"),
		chromedp.Click(`button.bulk`, chromedp.ByQuery), chromedp.WaitVisible(`#job`, chromedp.ByQuery))
	var loc string
	run("the job's address", chromedp.Location(&loc))
	jobID, _, _ := strings.Cut(strings.TrimPrefix(loc, base+"/ui/bulk/"), "?")
	if !strings.HasPrefix(jobID, "bulk-") {
		t.Fatalf("the start went to %q; want a job's page", loc)
	}

	// The page reloads itself while the job runs: wait for it to say done
	// without navigating (a read during a reload fails and is tried again).
	var st string
	run("the job's page until it is done", chromedp.ActionFunc(func(c context.Context) error {
		for {
			rctx, cancel := context.WithTimeout(c, 2*time.Second)
			_ = chromedp.Evaluate(`(document.getElementById("job-status")||{}).innerText||""`, &st).Do(rctx)
			cancel()
			if strings.Contains(st, "done") {
				return nil
			}
			select {
			case <-c.Done():
				return fmt.Errorf("the page never showed the job done (last: %q): %w", st, c.Err())
			case <-time.After(300 * time.Millisecond):
			}
		}
	}))
	run("the ended job", chromedp.WaitVisible(`#job-acted`, chromedp.ByQuery), shot("bulk-job.png"))
	if a := text(`#job-acted`); a != "3" {
		t.Fatalf("the job's page says %q acted on; want 3", a)
	}
	job, err := cl.GetBulkJob(ctx, jobID)
	if err != nil || job.Status != dexv1.BulkJobStatus_BULK_JOB_STATUS_DONE || job.Acted != 3 || job.Reason != "batch stopped" {
		t.Fatalf("the API's job: %v, %v; want done, 3 acted on, reason batch stopped", job, err)
	}
	for _, id := range batch {
		waitStatus(t, ctx, cl, id, dexv1.SessionStatus_SESSION_STATUS_IDLE)
	}
	if got, err := cl.GetSession(ctx, "ses-unbatched"); err != nil || got.Session.Status != dexv1.SessionStatus_SESSION_STATUS_WAITING {
		t.Fatalf("the session without the label: %v, %v; want still waiting", got.GetSession().GetStatus(), err)
	}
	run("the jobs page", chromedp.Navigate(base+"/ui/bulk"), chromedp.WaitVisible(`#job-`+jobID, chromedp.ByQuery))
	if row := text(`#job-` + jobID); !strings.Contains(row, "cancel") || !strings.Contains(row, "done") {
		t.Fatalf("the jobs page's row reads %q", row)
	}
}

// schedulesInBrowser is refused a bad cron, creates a schedule from the
// form, triggers it once (a session with its labels starts), pauses it
// and deletes it, each checked through the API.
func schedulesInBrowser(t *testing.T, ctx context.Context, cl *client.Client, base string,
	run func(string, ...chromedp.Action), text func(string) string, shot func(string) chromedp.Action) {
	t.Helper()
	fill := func(cron, every string) chromedp.Tasks {
		return chromedp.Tasks{chromedp.Navigate(base + "/ui/schedules"), chromedp.WaitVisible(`#scheduleform`, chromedp.ByQuery),
			chromedp.SendKeys(`#scheduleform input[name="id"]`, "console-tick", chromedp.ByQuery),
			chromedp.SendKeys(`#scheduleform input[name="cron"]`, cron, chromedp.ByQuery),
			chromedp.SendKeys(`#scheduleform input[name="every"]`, every, chromedp.ByQuery),
			chromedp.SendKeys(`#scheduleform textarea[name="message"]`, "hello from a schedule", chromedp.ByQuery),
			chromedp.SendKeys(`#scheduleform textarea[name="labels"]`, "origin=console", chromedp.ByQuery),
			chromedp.SetValue(`#scheduleform select[name="overlap"]`, "allow", chromedp.ByQuery)}
	}
	run("a bad cron", fill("61 * * * *", ""), chromedp.Click(`button.create`, chromedp.ByQuery), chromedp.WaitVisible(`p.error`, chromedp.ByQuery))
	if e := text(`p.error`); !strings.Contains(e, `bad cron expression "61 * * * *"`) {
		t.Fatalf("the refused schedule reads %q; want the cluster's reason", e)
	}
	if _, err := cl.GetSchedule(ctx, "console-tick"); status.Code(err) != codes.NotFound {
		t.Fatalf("the refused schedule reads %v; want NotFound", err)
	}

	run("create a schedule", fill("", "1h"), shot("schedule-form.png"), chromedp.Click(`button.create`, chromedp.ByQuery),
		chromedp.WaitVisible(`#schedule-console-tick`, chromedp.ByQuery))
	sch, err := cl.GetSchedule(ctx, "console-tick")
	if err != nil || sch.IntervalMs != 3_600_000 || sch.Message != "hello from a schedule" || sch.Overlap != dexv1.ScheduleOverlap_SCHEDULE_OVERLAP_ALLOW || sch.Paused {
		t.Fatalf("the created schedule: %v, %v", sch, err)
	}

	run("trigger it", chromedp.Click(`#schedule-console-tick button.trigger`, chromedp.ByQuery), chromedp.WaitVisible(`p.notice a`, chromedp.ByQuery), shot("schedules.png"))
	sid := text(`p.notice a`)
	got, err := cl.GetSession(ctx, sid)
	if err != nil {
		t.Fatalf("the triggered session %q: %v", sid, err)
	}
	labels := map[string]string{}
	for _, l := range got.Session.Labels {
		labels[l.Key] = l.Value
	}
	if labels["origin"] != "console" || labels["dex.schedule"] != "console-tick" {
		t.Fatalf("the triggered session's labels %v; want origin=console and dex.schedule=console-tick", labels)
	}
	if len(got.Session.History) == 0 || got.Session.History[0].Text != "hello from a schedule" {
		t.Fatalf("the triggered session's history %v; want the schedule's message first", got.Session.History)
	}

	run("pause it", chromedp.Click(`#schedule-console-tick button.pause`, chromedp.ByQuery), chromedp.WaitVisible(`#schedule-console-tick button.resume`, chromedp.ByQuery))
	if sch, err := cl.GetSchedule(ctx, "console-tick"); err != nil || !sch.Paused {
		t.Fatalf("the paused schedule: %v, %v", sch, err)
	}

	run("delete it", chromedp.Click(`#schedule-console-tick input[name="confirm"]`, chromedp.ByQuery),
		chromedp.Click(`#schedule-console-tick button.delete`, chromedp.ByQuery), chromedp.WaitNotPresent(`#schedule-console-tick`, chromedp.ByQuery))
	if n := text(`p.notice`); !strings.Contains(n, "Deleted") {
		t.Fatalf("after the delete the page says %q", n)
	}
	if _, err := cl.GetSchedule(ctx, "console-tick"); status.Code(err) != codes.NotFound {
		t.Fatalf("the deleted schedule reads %v; want NotFound", err)
	}
	if _, err := cl.GetSession(ctx, sid); err != nil {
		t.Fatalf("the deleted schedule's session: %v; want it kept", err)
	}
}
