//go:build e2e

// Package browsertest drives the web console in headless Chromium against
// a real 3-node cluster and the scripted dexworker.
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/chaos/harness"
)

// binDir holds dexd and dexworker, built once for the package.
var binDir string

func TestMain(m *testing.M) {
	if chromium() == "" {
		os.Exit(m.Run()) // the test skips, saying why
	}
	harness.RunWithBinaries(m, &binDir, "dexd", "dexworker")
}

// chromium is Debian's chromium (or $DEX_CHROMIUM), "" when absent.
func chromium() string {
	for _, name := range []string{os.Getenv("DEX_CHROMIUM"), "chromium", "chromium-browser"} {
		if name == "" {
			continue
		}
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

const script = `{
  "turns": [
    {"match": "deploy to prod", "outputs": [
      {"tool_calls": [{"tool": "deploy", "arguments": {"env": "prod", "version": "1.4.2"}}]},
      {"text": "Deployed to prod."}
    ]},
    {"match": "deploy to staging", "outputs": [
      {"tool_calls": [{"tool": "deploy", "arguments": {"env": "staging"}}]},
      {"text": "Staging stays as it is."}
    ]},
    {"match": "ask me", "outputs": [
      {"tool_calls": [{"tool": "ask_user", "arguments": {"question": "Which region?"}}]},
      {"text": "Thanks for the answer."}
    ]}
  ],
  "default": [{"text": "Noted."}]
}`

// artifacts is where the screenshots go: $DEX_ARTIFACTS, else the test's
// temp dir. DEX_CONSOLE_DOCS=1 also writes them into docs/console.
func artifacts(t *testing.T) (dir string, docs bool) {
	dir = os.Getenv("DEX_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	docs = os.Getenv("DEX_CONSOLE_DOCS") == "1"
	if docs {
		if err := os.MkdirAll("../../../docs/console", 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir, docs
}

func TestConsoleInChromium(t *testing.T) {
	exe := chromium()
	if exe == "" {
		t.Skip("chromium is not installed (Debian: apt-get install chromium): the browser tests of the console need it")
	}
	dir := t.TempDir()
	shots, docs := artifacts(t)

	// The Chaos page shows the matrix report kept in docs.
	report := filepath.Join(dir, "chaos-report")
	if err := os.MkdirAll(report, 0o755); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile("../../../docs/reports/chaos-matrix.json"); err == nil {
		_ = os.WriteFile(filepath.Join(report, "matrix.json"), b, 0o644)
	}

	c, err := harness.NewCluster(harness.ClusterOptions{BinDir: binDir, Dir: dir, Args: []string{"--chaos-report", report}})
	if err != nil {
		t.Fatal(err)
	}
	var workers []*harness.Worker
	t.Cleanup(func() {
		for _, w := range workers {
			w.Kill()
		}
		c.KillAll()
		if t.Failed() {
			for _, n := range c.Nodes {
				t.Logf("--- %s log:\n%s", n.ID, tailLines(n.Log(), 20))
			}
		}
	})
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	leader, err := c.WaitReady(ctx)
	if err != nil {
		t.Fatal(err)
	}
	scriptPath := filepath.Join(dir, "script.json")
	if err := os.WriteFile(scriptPath, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	token, err := c.WorkerToken(ctx, "w1")
	if err != nil {
		t.Fatal(err)
	}
	w := harness.NewWorker(harness.WorkerOptions{BinDir: binDir, Dir: dir, Name: "w1", Target: c.Target(), Ledger: filepath.Join(dir, "ledger.jsonl"), Script: scriptPath, Token: token, TLS: c.TLS()})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	workers = append(workers, w)

	conn, err := client.Dial(c.Target(), c.DialOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cl := client.New(conn)
	for id, msg := range map[string]string{"ses-approve": "deploy to prod", "ses-deny": "deploy to staging", "ses-ask": "ask me", "ses-live": "hello"} {
		if _, err := cl.CreateSession(ctx, &dexv1.CreateSessionRequest{SessionId: id, Message: msg}); err != nil {
			t.Fatal(err)
		}
	}
	waitStatus(t, ctx, cl, "ses-approve", dexv1.SessionStatus_SESSION_STATUS_WAITING)
	waitStatus(t, ctx, cl, "ses-deny", dexv1.SessionStatus_SESSION_STATUS_WAITING)
	waitStatus(t, ctx, cl, "ses-ask", dexv1.SessionStatus_SESSION_STATUS_WAITING)
	waitStatus(t, ctx, cl, "ses-live", dexv1.SessionStatus_SESSION_STATUS_IDLE)
	// A session of an agent no Worker serves: its model Step waits, saying
	// why. It is the only one created since createdSince.
	time.Sleep(5 * time.Millisecond)
	createdSince := time.Now()
	time.Sleep(5 * time.Millisecond)
	if _, err := cl.CreateSession(ctx, &dexv1.CreateSessionRequest{SessionId: "ses-agent", Agent: "bot@9", Message: "hi",
		Labels: []*dexv1.Label{{Key: "team", Value: "bots"}}}); err != nil {
		t.Fatal(err)
	}

	// The browser uses a follower's console: it survives the leader's kill
	// and reads through the cluster from whichever node leads.
	var follower *harness.Node
	for _, n := range c.Nodes {
		if n != leader {
			follower = n
			break
		}
	}
	base := "http://" + follower.HTTPAddr

	profile, err := os.MkdirTemp("", "dex-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(profile)
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(profile),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(1280, 900),
	)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(alloc, chromedp.WithLogf(t.Logf))
	defer cancelBrowser()
	// The first Run starts the browser and ties it to bctx (the later runs'
	// contexts end with each step).
	if err := chromedp.Run(bctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	run := func(what string, actions ...chromedp.Action) {
		t.Helper()
		actx, acancel := context.WithTimeout(bctx, 60*time.Second)
		defer acancel()
		if err := chromedp.Run(actx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	shot := func(name string) chromedp.Action {
		return chromedp.ActionFunc(func(ctx context.Context) error {
			var png []byte
			if err := chromedp.FullScreenshot(&png, 100).Do(ctx); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(shots, name), png, 0o644); err != nil {
				return err
			}
			if docs {
				return os.WriteFile(filepath.Join("../../../docs/console", name), png, 0o644)
			}
			return nil
		})
	}
	if c.AdminToken != "" { // DEX_CHAOS_ACL=1: the console wants a token
		run("token header", network.Enable(), network.SetExtraHTTPHeaders(network.Headers{"Authorization": "Bearer " + c.AdminToken}))
	}
	text := func(sel string) string {
		var s string
		run("read "+sel, chromedp.Text(sel, &s, chromedp.ByQuery))
		return s
	}
	// marked: the page was not reloaded since mark().
	mark := chromedp.Evaluate(`window.__dexMark = 1`, nil)
	marked := func() bool {
		var v bool
		run("read the mark", chromedp.Evaluate(`window.__dexMark === 1`, &v))
		return v
	}
	live := chromedp.WaitVisible(`#livestate.on`, chromedp.ByQuery)

	// Sessions: the list newest first, and its filters.
	run("sessions page", chromedp.Navigate(base+"/ui/sessions"), chromedp.WaitVisible(`#sessions`, chromedp.ByQuery), shot("sessions.png"))
	listFiltersInBrowser(t, base, createdSince, run, text, shot)

	// Approve: the call runs and the session goes idle, without a reload.
	run("open the waiting session", chromedp.Click(`a[href="/ui/sessions/ses-approve"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`button.approve`, chromedp.ByQuery), live, mark, shot("session-waiting.png"))
	if args := text(`#waits pre.args`); !strings.Contains(args, `"version": "1.4.2"`) {
		t.Fatalf("the approval shows arguments %q", args)
	}
	run("approve", chromedp.Click(`button.approve`, chromedp.ByQuery), chromedp.WaitVisible(`#status.st-idle`, chromedp.ByQuery))
	if tl := text(`#timeline`); !strings.Contains(tl, "Deployed to prod.") || !strings.Contains(tl, "deployed ") {
		t.Fatalf("after the approval the timeline reads %q; want the deploy's result and the model's answer", tl)
	}
	if !marked() {
		t.Fatal("the page reloaded to show the approval's effect")
	}
	run("screenshot", shot("session-approved.png"))

	// Deny, with a reason the model is told.
	run("open the second approval", chromedp.Navigate(base+"/ui/sessions/ses-deny"), chromedp.WaitVisible(`button.deny`, chromedp.ByQuery), live, mark,
		chromedp.SendKeys(`input[name="reason"]`, "not on a friday", chromedp.ByQuery), chromedp.Click(`button.deny`, chromedp.ByQuery),
		chromedp.WaitVisible(`#status.st-idle`, chromedp.ByQuery))
	if tl := text(`#timeline`); !strings.Contains(tl, "not on a friday") || !strings.Contains(tl, "Staging stays as it is.") {
		t.Fatalf("after the denial the timeline reads %q", tl)
	}
	if !marked() {
		t.Fatal("the page reloaded to show the denial")
	}

	// Answer a question.
	run("open the question", chromedp.Navigate(base+"/ui/sessions/ses-ask"), chromedp.WaitVisible(`textarea[name="answer"]`, chromedp.ByQuery), live, mark, shot("session-question.png"),
		chromedp.SendKeys(`textarea[name="answer"]`, "eu-west-1", chromedp.ByQuery), chromedp.Click(`button.answer`, chromedp.ByQuery),
		chromedp.WaitVisible(`#status.st-idle`, chromedp.ByQuery))
	if tl := text(`#timeline`); !strings.Contains(tl, "eu-west-1") || !strings.Contains(tl, "Thanks for the answer.") {
		t.Fatalf("after the answer the timeline reads %q", tl)
	}

	// The agent of a session, and why its model Step is not handed out.
	run("open the unserved agent's session", chromedp.Navigate(base+"/ui/sessions/ses-agent"), chromedp.WaitVisible(`#agent`, chromedp.ByQuery))
	if s := text(`#agent`); !strings.Contains(s, "bot@9") {
		t.Fatalf("the session page names the agent %q; want bot@9", s)
	}
	if s := text(`#step-ses-agent-s1`); !strings.Contains(s, `no live Worker serves agent "bot@9"`) && !strings.Contains(s, "done") {
		t.Fatalf("the unserved model Step reads %q; want why it waits", s)
	}

	// The cluster and chaos pages.
	run("cluster page", chromedp.Navigate(base+"/ui/cluster"), chromedp.WaitVisible(`#workers`, chromedp.ByQuery), shot("cluster.png"))
	if s := text(`#workers`); !strings.Contains(s, "w1") || !strings.Contains(s, "deploy") || !strings.Contains(s, "the default agent") {
		t.Fatalf("the cluster page's Workers: %q", s)
	}
	run("chaos page", chromedp.Navigate(base+"/ui/chaos"), chromedp.WaitVisible(`main h1`, chromedp.ByQuery), shot("chaos.png"))

	manageInBrowser(t, ctx, cl, base, run, text, shot)
	bulkInBrowser(t, ctx, cl, base, run, text, shot)
	schedulesInBrowser(t, ctx, cl, base, run, text, shot)

	// A live update after the leader's SIGKILL: the page's event stream
	// follows the new leader and shows the next message without a reload.
	run("open an idle session", chromedp.Navigate(base+"/ui/sessions/ses-live"), chromedp.WaitVisible(`#status.st-idle`, chromedp.ByQuery), live, mark)
	leader.Kill()
	if _, err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.SendMessage(ctx, "ses-live", "after the takeover", ""); err != nil {
		t.Fatal(err)
	}
	run("the update after the takeover", chromedp.Poll(`document.getElementById("timeline").innerText.includes("after the takeover")`, nil, chromedp.WithPollingTimeout(45*time.Second)),
		chromedp.WaitVisible(`#status.st-idle`, chromedp.ByQuery), live, shot("session-after-takeover.png"))
	if !marked() {
		t.Fatal("the page reloaded to show the update after the takeover")
	}
	t.Logf("screenshots in %s", shots)
}

func waitStatus(t *testing.T, ctx context.Context, cl *client.Client, id string, want dexv1.SessionStatus) {
	t.Helper()
	for {
		got, err := cl.GetSession(ctx, id)
		if err == nil && got.Session.Status == want {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("session %s never became %v (last: %v, %v)", id, want, got.GetSession().GetStatus(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
