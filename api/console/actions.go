package console

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// maxForm bounds an action's form (an answer or a message is the largest
// field).
const maxForm = 1 << 20

// done is where an action sends the browser and what it is told there
// (a key of doneNotices, so a link cannot make the page say anything).
type done struct {
	notice string
	// to is the page to show; "" is the session's own.
	to string
}

// sessionAction runs one action form of a session page (approve, deny,
// answer, resume, reconcile, send, cancel, close, delete) through the API.
// A bad form is refused before any call (400 and the reason); an API
// refusal is shown with its own message. On success the browser is sent
// on with a notice (post, redirect, get).
func (c *Console) sessionAction(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		c.showSession(w, r, http.StatusBadRequest, "the form could not be read: "+err.Error(), "")
		return
	}
	if msg := checkCSRF(r); msg != "" {
		c.showSession(w, r, http.StatusForbidden, msg, "")
		return
	}
	id, action := r.PathValue("id"), r.PathValue("action")
	do, err := c.parseAction(action, r)
	if err != nil {
		c.showSession(w, r, http.StatusBadRequest, err.Error(), "")
		return
	}
	ctx, cancel := c.apiContext(r)
	defer cancel()
	got, err := c.sessions.GetSession(ctx, id)
	if err != nil {
		c.apiError(w, r, err)
		return
	}
	if step := r.PostFormValue("step"); step != "" && !hasStep(got.Steps, step) {
		c.showSession(w, r, http.StatusBadRequest, fmt.Sprintf("step %s is not a step of session %s", step, id), "")
		return
	}
	res, err := do(ctx, id)
	if err != nil {
		c.showSession(w, r, httpCode(err), c.apiMessage(r, err), "")
		return
	}
	to := res.to
	if to == "" {
		to = "/ui/sessions/" + url.PathEscape(id)
	}
	http.Redirect(w, r, to+sep(to)+"done="+res.notice, http.StatusSeeOther)
}

// sep joins a query to a path that may have one.
func sep(path string) string {
	if strings.Contains(path, "?") {
		return "&"
	}
	return "?"
}

func hasStep(steps []*dexv1.Step, id string) bool {
	for _, s := range steps {
		if s.Id == id {
			return true
		}
	}
	return false
}

type actionFunc func(ctx context.Context, sessionID string) (done, error)

// noticeOnly is an action that stays on the session page.
func noticeOnly(notice string, call func(ctx context.Context, id string) error) actionFunc {
	return func(ctx context.Context, id string) (done, error) {
		return done{notice: notice}, call(ctx, id)
	}
}

// parseAction checks the form of an action and returns the call it makes.
func (c *Console) parseAction(action string, r *http.Request) (actionFunc, error) {
	step := strings.TrimSpace(r.PostFormValue("step"))
	needStep := func() error {
		if step == "" {
			return fmt.Errorf("%s needs the step of the wait (the form's step field is empty)", action)
		}
		return nil
	}
	switch action {
	case "approve", "deny":
		if err := needStep(); err != nil {
			return nil, err
		}
		approved, reason := action == "approve", strings.TrimSpace(r.PostFormValue("reason"))
		notice := map[bool]string{true: "approved", false: "denied"}[approved]
		return noticeOnly(notice, func(ctx context.Context, _ string) error {
			return c.sessions.ResolveApproval(ctx, step, approved, reason)
		}), nil
	case "answer":
		if err := needStep(); err != nil {
			return nil, err
		}
		answer := r.PostFormValue("answer")
		if strings.TrimSpace(answer) == "" {
			return nil, fmt.Errorf("the answer is empty: write one")
		}
		return noticeOnly("answered", func(ctx context.Context, _ string) error {
			return c.sessions.AnswerQuestion(ctx, step, answer)
		}), nil
	case "resume":
		var choice dexv1.ResumeChoice
		switch r.PostFormValue("choice") {
		case "", "retry":
			choice = dexv1.ResumeChoice_RESUME_CHOICE_RETRY
		case "drop":
			choice = dexv1.ResumeChoice_RESUME_CHOICE_DROP
		default:
			return nil, fmt.Errorf("resume choice %q: use retry or drop", r.PostFormValue("choice"))
		}
		return noticeOnly("resumed", func(ctx context.Context, id string) error {
			return c.sessions.ResumeSessionWith(ctx, id, choice)
		}), nil
	case "reconcile":
		if err := needStep(); err != nil {
			return nil, err
		}
		var outcome dexv1.Outcome
		switch r.PostFormValue("outcome") {
		case "succeeded":
			outcome = dexv1.Outcome_OUTCOME_SUCCEEDED
		case "failed":
			outcome = dexv1.Outcome_OUTCOME_FAILED
		default:
			return nil, fmt.Errorf("reconcile outcome %q: use succeeded or failed", r.PostFormValue("outcome"))
		}
		note := strings.TrimSpace(r.PostFormValue("note"))
		return noticeOnly("reconciled", func(ctx context.Context, _ string) error {
			return c.sessions.ReconcileOutcome(ctx, step, outcome, note)
		}), nil
	}
	return c.parseManage(action, r)
}
