package console

import (
	"cmp"
	"net/http"
	"slices"
	"strconv"
	"strings"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/wirerules"
)

// sessionsPerPage is the length of one page of the sessions list.
const sessionsPerPage = 50

// listPage is how many sessions one ListSessions call asks for.
const listPage = 10000

var statusFilters = []dexv1.SessionStatus{
	dexv1.SessionStatus_SESSION_STATUS_IDLE, dexv1.SessionStatus_SESSION_STATUS_RUNNING,
	dexv1.SessionStatus_SESSION_STATUS_WAITING, dexv1.SessionStatus_SESSION_STATUS_ERRORED,
	dexv1.SessionStatus_SESSION_STATUS_PAUSED, dexv1.SessionStatus_SESSION_STATUS_CLOSED,
}

type statusCount struct {
	Name   string
	Count  int
	Active bool
	URL    string
}

type sessionsData struct {
	Counts []statusCount
	Total  int
	Status string
	Query  string
	// Filter is the list's filter; the bulk form acts on it, as typed
	// in Bulk.
	Filter   listFilter
	Bulk     bulkForm
	Matching int
	Page     int
	Pages    int
	Sessions []*dexv1.SessionSummary
	Prev     string
	Next     string
	// Partitions is the cluster's number of partitions (0: unknown); with
	// more than one, each row names its session's.
	Partitions int
	// Rows: each shown session's first message and wait (listrows.go).
	Rows map[string]rowView
}

func sessionsURL(f listFilter, status string, page int) string {
	v := f.values(status)
	if page > 1 {
		v.Set("page", strconv.Itoa(page))
	}
	if len(v) == 0 {
		return "/ui/sessions"
	}
	return "/ui/sessions?" + v.Encode()
}

// sessionsPage lists the sessions newest first, with the counts by status,
// a filter by status, agent and labels, a search by id and pages.
func (c *Console) sessionsPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	filter, err := readFilter(q)
	if err != nil {
		c.renderError(w, r, http.StatusBadRequest, err.Error())
		return
	}
	pageNo := 1
	if p := q.Get("page"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 {
			c.renderError(w, r, http.StatusBadRequest, "page "+strconv.Quote(p)+" is not a page number (1, 2, …)")
			return
		}
		pageNo = n
	}
	notice := ""
	if q.Get("done") == "deleted" && q.Get("id") != "" {
		notice = "Deleted session " + q.Get("id") + "."
	}
	c.showSessions(w, r, http.StatusOK, "", notice, filter, pageNo, bulkForm{})
}

// showSessions renders a page of the list, with an error or a notice on
// top, and the bulk form as typed.
func (c *Console) showSessions(w http.ResponseWriter, r *http.Request, code int, errMsg, notice string, filter listFilter, pageNo int, form bulkForm) {
	ctx, cancel := c.apiContext(r)
	defer cancel()
	all, err := c.sessions.ListSessionsBy(ctx, listPage)
	if err != nil {
		c.apiError(w, r, err)
		return
	}
	d := buildSessions(all, filter, pageNo)
	d.Partitions = c.partitionCount(ctx)
	d.Rows = c.rowViews(ctx, d.Sessions)
	d.Bulk = form
	c.render(w, r, code, "sessions", page{Title: "Sessions", Nav: "sessions", Error: errMsg, Notice: notice, Data: d})
}

func buildSessions(all []*dexv1.SessionSummary, f listFilter, pageNo int) *sessionsData {
	status := f.Status
	d := &sessionsData{Status: status, Query: f.Query, Filter: f, Page: pageNo, Total: len(all)}
	counts := map[dexv1.SessionStatus]int{}
	var match []*dexv1.SessionSummary
	for _, s := range all {
		counts[s.Status]++
		if !f.matches(s) {
			continue
		}
		match = append(match, s)
	}
	d.Counts = append(d.Counts, statusCount{Name: "all", Count: len(all), Active: status == "", URL: sessionsURL(f, "", 1)})
	for _, st := range statusFilters {
		n := wirerules.SessionStatusName(st)
		d.Counts = append(d.Counts, statusCount{Name: n, Count: counts[st], Active: status == n, URL: sessionsURL(f, n, 1)})
	}
	slices.SortFunc(match, func(a, b *dexv1.SessionSummary) int {
		if a.CreatedAtMs != b.CreatedAtMs {
			return cmp.Compare(b.CreatedAtMs, a.CreatedAtMs)
		}
		return strings.Compare(b.Id, a.Id)
	})
	d.Matching = len(match)
	d.Pages = max(1, (len(match)+sessionsPerPage-1)/sessionsPerPage)
	from := min((pageNo-1)*sessionsPerPage, len(match))
	d.Sessions = match[from:min(from+sessionsPerPage, len(match))]
	if pageNo > 1 {
		d.Prev = sessionsURL(f, status, min(pageNo-1, d.Pages))
	}
	if pageNo < d.Pages {
		d.Next = sessionsURL(f, status, pageNo+1)
	}
	return d
}
