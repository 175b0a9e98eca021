package console

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// Bulk jobs (docs/bulk.md): the sessions list's form starts one on the
// list's filter; a job's page follows its progress and can cancel it.

// bulkActions are the form's actions, in the API's words.
var bulkActions = map[string]dexv1.BulkAction{
	"cancel": dexv1.BulkAction_BULK_ACTION_CANCEL, "resume": dexv1.BulkAction_BULK_ACTION_RESUME,
	"close": dexv1.BulkAction_BULK_ACTION_CLOSE, "delete": dexv1.BulkAction_BULK_ACTION_DELETE,
	"label": dexv1.BulkAction_BULK_ACTION_LABEL,
}

// bulkForm is the bulk form as typed, kept when it is refused.
type bulkForm struct {
	Action, Reason, Set string
	All                 bool
}

// bulkRefresh is how often a running job's page reloads itself (seconds).
const bulkRefresh = "2"

// startBulk starts a job on the form's filter and shows it. A form that
// cannot be a job is refused before any call; the API's refusal is shown
// with its reason; either way the list comes back with the form as typed.
func (c *Console) startBulk(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		c.renderError(w, r, http.StatusBadRequest, "the form could not be read: "+err.Error())
		return
	}
	filter, err := readFilter(r.PostForm, time.Now())
	if err != nil {
		c.renderError(w, r, http.StatusBadRequest, err.Error())
		return
	}
	form := bulkForm{Action: r.PostFormValue("action"), Reason: strings.TrimSpace(r.PostFormValue("reason")), Set: r.PostFormValue("set"), All: r.PostFormValue("all") == "yes"}
	refuse := func(code int, msg string) { c.showSessions(w, r, code, msg, "", filter, "", form) }
	if msg := checkCSRF(r); msg != "" {
		refuse(http.StatusForbidden, msg)
		return
	}
	req, err := form.request(filter)
	if err != nil {
		refuse(http.StatusBadRequest, err.Error())
		return
	}
	ctx, cancel := c.apiContext(r)
	defer cancel()
	job, err := c.sessions.StartBulkAction(ctx, req)
	if err != nil {
		refuse(httpCode(err), c.apiMessage(r, err))
		return
	}
	http.Redirect(w, r, "/ui/bulk/"+url.PathEscape(job.Id)+"?done=started", http.StatusSeeOther)
}

// request checks the form and makes its StartBulkAction.
func (f bulkForm) request(filter listFilter) (*dexv1.StartBulkActionRequest, error) {
	if filter.Query != "" {
		return nil, fmt.Errorf("a bulk job cannot act on an id lookup (“%s”): act on that session from its page, or filter the list", filter.Query)
	}
	action, ok := bulkActions[f.Action]
	if !ok {
		return nil, fmt.Errorf("bulk action %q: choose cancel, resume, close, delete or label", f.Action)
	}
	// An action on every session is one stray click from a disaster: the
	// console asks for the box for each action, the API for a delete.
	if filter.Unfiltered() && !f.All {
		return nil, fmt.Errorf("no filter is applied, so this would %s every session: filter the list, or tick “all sessions”", f.Action)
	}
	req := &dexv1.StartBulkActionRequest{Action: action, Filter: filter.bulk(), All: f.All && filter.Unfiltered()}
	switch action {
	case dexv1.BulkAction_BULK_ACTION_CANCEL:
		req.Reason = f.Reason
	case dexv1.BulkAction_BULK_ACTION_LABEL:
		labels, err := parseLabels(f.Set)
		if err != nil {
			return nil, err
		}
		if len(labels) == 0 {
			return nil, fmt.Errorf("a label job needs the labels to set: KEY=VALUE, one a line")
		}
		req.Labels = labels
	}
	return req, nil
}

// bulkJobView is a job as its pages show it.
type bulkJobView struct {
	*dexv1.BulkJob
	Action, Status, Filter string
	Running                bool
}

func viewBulkJob(j *dexv1.BulkJob) bulkJobView {
	return bulkJobView{BulkJob: j, Action: enumWord(j.Action.String(), "BULK_ACTION_"), Status: enumWord(j.Status.String(), "BULK_JOB_STATUS_"),
		Filter: filterText(j.Filter), Running: j.Status == dexv1.BulkJobStatus_BULK_JOB_STATUS_RUNNING}
}

var bulkNotices = map[string]string{
	"started":   "Job started: the cluster acts on the matching sessions in steps; this page follows it.",
	"cancelled": "Job cancelled: no further session is acted on; those acted on stay as they are.",
}

// bulkJobsPage lists the jobs the cluster keeps, newest first.
func (c *Console) bulkJobsPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := c.apiContext(r)
	defer cancel()
	jobs, err := c.sessions.ListBulkJobs(ctx)
	if err != nil {
		c.apiError(w, r, err)
		return
	}
	views := make([]bulkJobView, 0, len(jobs))
	for _, j := range jobs {
		views = append(views, viewBulkJob(j))
	}
	c.render(w, r, http.StatusOK, "bulkjobs", page{Title: "Bulk jobs", Nav: "sessions", Data: views})
}

// bulkJobPage shows one job's progress; while it runs the page reloads.
func (c *Console) bulkJobPage(w http.ResponseWriter, r *http.Request) {
	c.showBulkJob(w, r, http.StatusOK, "", bulkNotices[r.URL.Query().Get("done")])
}

func (c *Console) showBulkJob(w http.ResponseWriter, r *http.Request, code int, errMsg, notice string) {
	id := r.PathValue("id")
	ctx, cancel := c.apiContext(r)
	defer cancel()
	j, err := c.sessions.GetBulkJob(ctx, id)
	if err != nil {
		c.apiError(w, r, err)
		return
	}
	v := viewBulkJob(j)
	p := page{Title: "Bulk job " + id, Nav: "sessions", Error: errMsg, Notice: notice, Data: v}
	if v.Running {
		// Reload without the notice, which was for the first view.
		p.Refresh = bulkRefresh + "; url=/ui/bulk/" + url.PathEscape(id)
	}
	c.render(w, r, code, "bulkjob", p)
}

// cancelBulkJob stops a running job.
func (c *Console) cancelBulkJob(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		c.showBulkJob(w, r, http.StatusBadRequest, "the form could not be read: "+err.Error(), "")
		return
	}
	if msg := checkCSRF(r); msg != "" {
		c.showBulkJob(w, r, http.StatusForbidden, msg, "")
		return
	}
	id := r.PathValue("id")
	ctx, cancel := c.apiContext(r)
	defer cancel()
	if _, err := c.sessions.CancelBulkJob(ctx, id); err != nil {
		c.showBulkJob(w, r, httpCode(err), c.apiMessage(r, err), "")
		return
	}
	http.Redirect(w, r, "/ui/bulk/"+url.PathEscape(id)+"?done=cancelled", http.StatusSeeOther)
}
