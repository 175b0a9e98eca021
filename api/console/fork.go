package console

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/wirerules"
)

// forkData is the fork page: the entry forked at and the form.
type forkData struct {
	Source *dexv1.Session
	At     uint64
	// Entry is the source's entry at At (nil when the page was not able
	// to read it).
	Entry *dexv1.HistoryEntry
	// Form, as typed: empty agent and labels keep the source's.
	ID, Message, Agent, Labels string
}

// parseAt reads the entry a fork ends with.
func parseAt(s string) (uint64, error) {
	n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("fork at %q: give the seq of a history entry (1, 2, …)", s)
	}
	return n, nil
}

// forkPage shows the form that forks a session at one of its history
// entries (the timeline's "fork here").
func (c *Console) forkPage(w http.ResponseWriter, r *http.Request) {
	at, err := parseAt(r.URL.Query().Get("at"))
	if err != nil {
		c.renderError(w, r, http.StatusBadRequest, err.Error())
		return
	}
	c.renderFork(w, r, http.StatusOK, "", &forkData{At: at})
}

// renderFork reads the source and shows the form with d's values.
func (c *Console) renderFork(w http.ResponseWriter, r *http.Request, code int, errMsg string, d *forkData) {
	id := r.PathValue("id")
	ctx, cancel := c.apiContext(r)
	defer cancel()
	got, err := c.sessions.GetSession(ctx, id)
	if err != nil {
		c.apiError(w, r, err)
		return
	}
	d.Source = got.Session
	for _, e := range got.Session.History {
		if e.Seq == d.At {
			d.Entry = e
		}
	}
	if d.Entry == nil && errMsg == "" {
		c.renderError(w, r, http.StatusNotFound, fmt.Sprintf("session %s holds no history entry %d", id, d.At))
		return
	}
	c.render(w, r, code, "fork", page{Title: "Fork " + id, Nav: "sessions", Error: errMsg, Data: d})
}

// fork forks the session at the form's entry and shows the fork; the
// API's refusal (an entry of a turn that has not ended, a cut between a
// model output and its results) is shown on the form, as typed.
func (c *Console) fork(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		c.renderError(w, r, http.StatusBadRequest, "the form could not be read: "+err.Error())
		return
	}
	d := &forkData{
		ID:      strings.TrimSpace(r.PostFormValue("id")),
		Message: r.PostFormValue("message"),
		Agent:   strings.TrimSpace(r.PostFormValue("agent")),
		Labels:  r.PostFormValue("labels"),
	}
	at, err := parseAt(r.PostFormValue("at"))
	if err != nil {
		c.renderError(w, r, http.StatusBadRequest, err.Error())
		return
	}
	d.At = at
	if msg := checkCSRF(r); msg != "" {
		c.renderFork(w, r, http.StatusForbidden, msg, d)
		return
	}
	req, err := d.request(r.PathValue("id"))
	if err != nil {
		c.renderFork(w, r, http.StatusBadRequest, err.Error(), d)
		return
	}
	ctx, cancel := c.apiContext(r)
	defer cancel()
	s, err := c.sessions.ForkSession(ctx, req)
	if err != nil {
		c.renderFork(w, r, httpCode(err), c.apiMessage(r, err), d)
		return
	}
	http.Redirect(w, r, "/ui/sessions/"+url.PathEscape(s.Id)+"?done=forked", http.StatusSeeOther)
}

// request checks the form and makes its ForkSession.
func (d *forkData) request(source string) (*dexv1.ForkSessionRequest, error) {
	if d.ID != "" {
		if err := wirerules.CheckID("fork id", d.ID); err != nil {
			return nil, err
		}
	}
	if err := wirerules.CheckAgent(d.Agent); err != nil {
		return nil, err
	}
	labels, err := parseLabels(d.Labels)
	if err != nil {
		return nil, err
	}
	req := &dexv1.ForkSessionRequest{SourceSessionId: source, AtSeq: d.At, SessionId: d.ID, Agent: d.Agent, Labels: labels}
	if strings.TrimSpace(d.Message) != "" {
		req.Message = d.Message
	}
	return req, nil
}
