package console

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/wirerules"
)

// The sessions list reads one page through ListSessions with the filter
// given: the cluster narrows and orders through its indexes, so a page
// costs the same with ten sessions or a million. Nothing is filtered,
// sorted or counted here.

// sessionsPerPage is the length of one page of the sessions list.
const sessionsPerPage = 50

// maxListCalls bounds the ListSessions calls of one page: a filtered page
// of the API may come back short, even empty, with a token (it examines a
// bounded number of index entries), so the console reads on until it has
// a page or the list ends, but not without end.
const maxListCalls = 20

var statusFilters = []dexv1.SessionStatus{
	dexv1.SessionStatus_SESSION_STATUS_IDLE, dexv1.SessionStatus_SESSION_STATUS_RUNNING,
	dexv1.SessionStatus_SESSION_STATUS_WAITING, dexv1.SessionStatus_SESSION_STATUS_ERRORED,
	dexv1.SessionStatus_SESSION_STATUS_PAUSED, dexv1.SessionStatus_SESSION_STATUS_CLOSED,
}

// statusLink is one choice of the status filter.
type statusLink struct {
	Name   string
	Active bool
	URL    string
}

type sessionsData struct {
	Statuses []statusLink
	Status   string
	// Query is the id looked up, when none was found.
	Query string
	// Filter is the list's filter; the bulk form acts on it, as typed
	// in Bulk.
	Filter   listFilter
	Bulk     bulkForm
	Sessions []*dexv1.SessionSummary
	// First links to the first page (on a later one), Next to the page
	// after this one ("" on the last).
	First string
	Next  string
	// Short: the page holds fewer than sessionsPerPage sessions, yet the
	// list goes on (maxListCalls were spent).
	Short bool
	// Partitions is the cluster's number of partitions (0: unknown); with
	// more than one, each row names its session's.
	Partitions int
	// Rows: each shown session's first message and wait (listrows.go).
	Rows map[string]rowView
}

// sessionsURL is the list with filter f, another status, from token.
func sessionsURL(f listFilter, status, token string) string {
	v := f.values(status)
	if token != "" {
		v.Set("token", token)
	}
	if len(v) == 0 {
		return "/ui/sessions"
	}
	return "/ui/sessions?" + v.Encode()
}

// sessionsPage lists the sessions the filter keeps, newest first unless
// asked otherwise, a page at a time; q opens the session of that id.
func (c *Console) sessionsPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	filter, err := readFilter(q, time.Now())
	if err != nil {
		c.renderError(w, r, http.StatusBadRequest, err.Error())
		return
	}
	if filter.Query != "" {
		c.lookupSession(w, r, filter)
		return
	}
	notice := ""
	if q.Get("done") == "deleted" && q.Get("id") != "" {
		notice = "Deleted session " + q.Get("id") + "."
	}
	c.showSessions(w, r, http.StatusOK, "", notice, filter, q.Get("token"), bulkForm{})
}

// lookupSession opens the session whose id is the filter's query, or shows
// the list saying there is none.
func (c *Console) lookupSession(w http.ResponseWriter, r *http.Request, filter listFilter) {
	id := filter.Query
	ctx, cancel := c.apiContext(r)
	_, err := c.sessions.GetSessionPage(ctx, &dexv1.GetSessionRequest{SessionId: id, HistoryLimit: 1, StepsLimit: 1})
	cancel()
	switch {
	case err == nil:
		http.Redirect(w, r, "/ui/sessions/"+url.PathEscape(id), http.StatusSeeOther)
	case status.Code(err) == codes.NotFound:
		filter.Query = ""
		c.showSessionsFor(w, r, http.StatusNotFound, "No session has the id “"+id+"”.", "", filter, "", bulkForm{}, id)
	default:
		c.apiError(w, r, err)
	}
}

// showSessions renders a page of the list from token, with an error or a
// notice on top, and the bulk form as typed.
func (c *Console) showSessions(w http.ResponseWriter, r *http.Request, code int, errMsg, notice string, filter listFilter, token string, form bulkForm) {
	c.showSessionsFor(w, r, code, errMsg, notice, filter, token, form, "")
}

func (c *Console) showSessionsFor(w http.ResponseWriter, r *http.Request, code int, errMsg, notice string, filter listFilter, token string, form bulkForm, query string) {
	ctx, cancel := c.apiContext(r)
	defer cancel()
	list, next, err := c.listPage(ctx, filter, token)
	if err != nil {
		c.apiError(w, r, err)
		return
	}
	d := &sessionsData{Status: filter.Status, Query: query, Filter: filter, Bulk: form, Sessions: list}
	d.Statuses = append(d.Statuses, statusLink{Name: "all", Active: filter.Status == "", URL: sessionsURL(filter, "", "")})
	for _, st := range statusFilters {
		n := wirerules.SessionStatusName(st)
		d.Statuses = append(d.Statuses, statusLink{Name: n, Active: filter.Status == n, URL: sessionsURL(filter, n, "")})
	}
	if token != "" {
		d.First = sessionsURL(filter, filter.Status, "")
	}
	if next != "" {
		d.Next = sessionsURL(filter, filter.Status, next)
		d.Short = len(list) < sessionsPerPage
	}
	d.Partitions = c.partitionCount(ctx)
	d.Rows = c.rowViews(ctx, d.Sessions)
	c.render(w, r, code, "sessions", page{Title: "Sessions", Nav: "sessions", Error: errMsg, Notice: notice, Data: d})
}

// listPage reads the page of the filter from token: it follows the API's
// tokens until it holds sessionsPerPage sessions, the list ends or
// maxListCalls calls were made. next is where the page after it starts
// ("" when the list ended).
func (c *Console) listPage(ctx context.Context, f listFilter, token string) (list []*dexv1.SessionSummary, next string, err error) {
	next = token
	for range maxListCalls {
		resp, err := c.sessions.ListSessionsPage(ctx, f.request(sessionsPerPage-len(list), next))
		if err != nil {
			return nil, "", err
		}
		list = append(list, resp.Sessions...)
		next = resp.NextPageToken
		if next == "" || len(list) >= sessionsPerPage {
			break
		}
	}
	return list, next, nil
}
