//go:build e2e

package browsertest

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// manageInBrowser starts a session from the console, sends it a message,
// is refused a fork and a delete inside its turn, cancels the turn, forks
// it from a timeline entry and deletes the fork, each through the pages'
// forms against the real cluster, and checks each effect through the API.
func manageInBrowser(t *testing.T, ctx context.Context, cl *client.Client, base string,
	run func(string, ...chromedp.Action), text func(string) string, shot func(string) chromedp.Action) {
	t.Helper()
	// Start a session with a first message and a label.
	run("start a session", chromedp.Navigate(base+"/ui/sessions"), chromedp.Click(`a#start`, chromedp.ByQuery),
		chromedp.WaitVisible(`#startform`, chromedp.ByQuery),
		chromedp.SendKeys(`#startform textarea[name="message"]`, "hello from the console", chromedp.ByQuery),
		chromedp.SendKeys(`#startform textarea[name="labels"]`, "team=console", chromedp.ByQuery),
		chromedp.SendKeys(`#startform input[name="id"]`, "ses-started", chromedp.ByQuery),
		shot("start.png"),
		chromedp.Click(`button.start`, chromedp.ByQuery),
		chromedp.WaitVisible(`#status.st-idle`, chromedp.ByQuery))
	got, err := cl.GetSession(ctx, "ses-started")
	if err != nil {
		t.Fatalf("the started session: %v", err)
	}
	if l := got.Session.GetLabels(); len(l) != 1 || l[0].Key != "team" || l[0].Value != "console" {
		t.Fatalf("the started session's labels %v; want team=console", l)
	}
	if tl := text(`#timeline`); !strings.Contains(tl, "hello from the console") || !strings.Contains(tl, "Noted.") {
		t.Fatalf("the started session's timeline reads %q", tl)
	}

	// Send a message: the model asks a question, the page follows.
	run("send a message", chromedp.SendKeys(`#sendform textarea[name="text"]`, "ask me", chromedp.ByQuery),
		chromedp.Click(`button.send`, chromedp.ByQuery),
		chromedp.WaitVisible(`textarea[name="answer"]`, chromedp.ByQuery), shot("session-manage.png"))
	waitStatus(t, ctx, cl, "ses-started", dexv1.SessionStatus_SESSION_STATUS_WAITING)
	got, err = cl.GetSession(ctx, "ses-started")
	if err != nil {
		t.Fatal(err)
	}
	askSeq := uint64(0)
	for _, e := range got.Session.History {
		if e.Text == "ask me" {
			askSeq = e.Seq
		}
	}
	if askSeq == 0 {
		t.Fatalf("the sent message is not in the history: %v", got.Session.History)
	}

	// The list shows how it began and what it waits for.
	run("the list", chromedp.Navigate(base+"/ui/sessions"), chromedp.WaitVisible(`#row-ses-started`, chromedp.ByQuery))
	if row := text(`#row-ses-started`); !strings.Contains(row, "hello from the console") || !strings.Contains(row, "an answer") || !strings.Contains(row, "team=console") {
		t.Fatalf("the list's row reads %q; want the first message, the wait and the label", row)
	}

	// A fork inside the unfinished turn: the cluster's reason, nothing made.
	run("fork inside the turn", chromedp.Navigate(base+"/ui/sessions/ses-started"), chromedp.WaitVisible(`#timeline`, chromedp.ByQuery),
		chromedp.Click(`#fork-`+strconv.FormatUint(askSeq, 10), chromedp.ByQuery), chromedp.WaitVisible(`#forkform`, chromedp.ByQuery),
		chromedp.Click(`button.fork`, chromedp.ByQuery), chromedp.WaitVisible(`p.error`, chromedp.ByQuery))
	if e := text(`p.error`); !strings.Contains(e, "which has not ended") {
		t.Fatalf("the refused fork reads %q; want the cluster's reason", e)
	}
	// Deleting a waiting session: refused, with the cluster's reason.
	run("delete while waiting", chromedp.Navigate(base+"/ui/sessions/ses-started"), chromedp.WaitVisible(`#deleteform`, chromedp.ByQuery),
		chromedp.Click(`#deleteform input[name="confirm"]`, chromedp.ByQuery), chromedp.Click(`button.delete`, chromedp.ByQuery),
		chromedp.WaitVisible(`p.error`, chromedp.ByQuery))
	if e := text(`p.error`); !strings.Contains(e, "only an idle, paused, errored or closed session can be deleted") {
		t.Fatalf("the refused delete reads %q", e)
	}
	if _, err := cl.GetSession(ctx, "ses-started"); err != nil {
		t.Fatalf("the refused delete deleted: %v", err)
	}

	// Cancel the turn: idle again, and the model is told.
	run("cancel", chromedp.Navigate(base+"/ui/sessions/ses-started"), chromedp.WaitVisible(`button.cancel`, chromedp.ByQuery),
		chromedp.SendKeys(`#cancelform input[name="reason"]`, "not now", chromedp.ByQuery),
		chromedp.Click(`button.cancel`, chromedp.ByQuery), chromedp.WaitVisible(`#status.st-idle`, chromedp.ByQuery))
	if tl := text(`#timeline`); !strings.Contains(tl, "cancelled by an operator in the console") {
		t.Fatalf("after the cancel the timeline reads %q", tl)
	}

	// Fork from the model's first answer, with a message of its own.
	run("fork here", chromedp.Click(`#fork-2`, chromedp.ByQuery), chromedp.WaitVisible(`#forkform`, chromedp.ByQuery),
		chromedp.SendKeys(`#forkform textarea[name="message"]`, "hello again", chromedp.ByQuery),
		chromedp.SendKeys(`#forkform input[name="id"]`, "ses-forked", chromedp.ByQuery),
		chromedp.Click(`button.fork`, chromedp.ByQuery), chromedp.WaitVisible(`#forkedfrom`, chromedp.ByQuery),
		chromedp.Poll(`document.getElementById("status").className.includes("st-idle")`, nil, chromedp.WithPollingTimeout(30*time.Second)))
	if s := text(`#forkedfrom`); !strings.Contains(s, "ses-started at entry #2") {
		t.Fatalf("the fork says it comes from %q", s)
	}
	fork, err := cl.GetSession(ctx, "ses-forked")
	if err != nil {
		t.Fatal(err)
	}
	if h := fork.Session.History; len(h) < 3 || h[0].Text != "hello from the console" || h[2].Text != "hello again" {
		t.Fatalf("the fork's history %v; want the source's first two entries, then its message", h)
	}

	// Delete the fork: the list says so, the API no longer has it.
	run("delete", chromedp.WaitVisible(`#deleteform`, chromedp.ByQuery),
		chromedp.Click(`#deleteform input[name="confirm"]`, chromedp.ByQuery), chromedp.Click(`button.delete`, chromedp.ByQuery),
		chromedp.WaitVisible(`#sessions`, chromedp.ByQuery))
	if n := text(`p.notice`); !strings.Contains(n, "Deleted session ses-forked.") {
		t.Fatalf("after the delete the list says %q", n)
	}
	if _, err := cl.GetSession(ctx, "ses-forked"); status.Code(err) != codes.NotFound {
		t.Fatalf("the deleted fork reads %v; want NotFound", err)
	}
}
