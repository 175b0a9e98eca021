package console

import (
	"net/http"
	"net/url"
	"strings"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/wirerules"
)

// startForm is the start page's form, kept as typed when it is refused.
type startForm struct {
	ID, Agent, Message, Labels string
}

func (c *Console) startPage(w http.ResponseWriter, r *http.Request) {
	c.renderStart(w, r, http.StatusOK, "", startForm{Agent: r.URL.Query().Get("agent")})
}

func (c *Console) renderStart(w http.ResponseWriter, r *http.Request, code int, errMsg string, f startForm) {
	c.render(w, r, code, "start", page{Title: "Start a session", Nav: "sessions", Error: errMsg, Data: f})
}

// refuseStart shows the API's refusal of the form, with the banner when
// the cluster has no quorum.
func (c *Console) refuseStart(w http.ResponseWriter, r *http.Request, err error, f startForm) {
	msg, banner := c.apiProblem(r, err)
	c.render(w, r, httpCode(err), "start", page{Title: "Start a session", Nav: "sessions", Error: msg, Banner: banner, Data: f})
}

// startSession creates a session from the form, with its first message
// when one is given, and shows it.
func (c *Console) startSession(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		c.renderStart(w, r, http.StatusBadRequest, "the form could not be read: "+err.Error(), startForm{})
		return
	}
	f := startForm{
		ID:      strings.TrimSpace(r.PostFormValue("id")),
		Agent:   strings.TrimSpace(r.PostFormValue("agent")),
		Message: r.PostFormValue("message"),
		Labels:  r.PostFormValue("labels"),
	}
	if msg := checkCSRF(r); msg != "" {
		c.renderStart(w, r, http.StatusForbidden, msg, f)
		return
	}
	req, err := f.request()
	if err != nil {
		c.renderStart(w, r, http.StatusBadRequest, err.Error(), f)
		return
	}
	ctx, cancel := c.apiContext(r)
	defer cancel()
	s, err := c.sessions.CreateSession(ctx, req)
	if err != nil {
		c.refuseStart(w, r, err, f)
		return
	}
	http.Redirect(w, r, "/ui/sessions/"+url.PathEscape(s.Id)+"?done=started", http.StatusSeeOther)
}

// request checks the form and makes its CreateSession.
func (f startForm) request() (*dexv1.CreateSessionRequest, error) {
	if f.ID != "" {
		if err := wirerules.CheckID("session id", f.ID); err != nil {
			return nil, err
		}
	}
	if err := wirerules.CheckAgent(f.Agent); err != nil {
		return nil, err
	}
	labels, err := parseLabels(f.Labels)
	if err != nil {
		return nil, err
	}
	req := &dexv1.CreateSessionRequest{SessionId: f.ID, Agent: f.Agent, Labels: labels}
	if strings.TrimSpace(f.Message) != "" {
		req.Message = f.Message
	}
	return req, nil
}
