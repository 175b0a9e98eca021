package console

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/wirerules"
)

// listFilter is what the sessions list is narrowed to and how it is
// ordered. The narrowing is the API's own filter (ListSessions reads it
// through the cluster's indexes, and a bulk job takes exactly it); the id
// lookup q is the console's and is never part of a list.
type listFilter struct {
	Status     string
	Agent      string
	Labels     []*dexv1.Label
	Parent     string
	ForkedFrom string
	// Times as typed (a duration ago, an RFC 3339 time or a date) and
	// what they resolved to, in Unix milliseconds (0: no bound).
	Times [len(timeFields)]timeBound
	// Order is "created" or "updated"; Oldest reads oldest first.
	Order  string
	Oldest bool
	Query  string
}

// timeBound is one bound of a time range, as typed and resolved.
type timeBound struct {
	Text string
	Ms   int64
}

// timeField is a time bound's query name and what it says.
type timeField struct{ Name, Label string }

// timeFields are the time bounds, in the order listFilter.Times holds them:
// since bounds are inclusive, before bounds exclusive (as the API's).
var timeFields = [...]timeField{
	{"created_since", "created since"}, {"created_before", "created before"},
	{"updated_since", "updated since"}, {"updated_before", "updated before"},
}

const (
	createdSince = iota
	createdBefore
	updatedSince
	updatedBefore
)

// readFilter reads a filter from a query or a form: status, agent,
// label=KEY=VALUE (repeated), parent, forked_from, the time bounds, order,
// dir and q. It refuses what the API would, naming the field; now is what
// a duration counts back from.
func readFilter(v url.Values, now time.Time) (listFilter, error) {
	get := func(k string) string { return strings.TrimSpace(v.Get(k)) }
	f := listFilter{Status: get("status"), Agent: get("agent"), Parent: get("parent"), ForkedFrom: get("forked_from"), Query: get("q")}
	if f.Status != "" && statusOf(f.Status) == dexv1.SessionStatus_SESSION_STATUS_UNSPECIFIED {
		return f, fmt.Errorf("unknown status %s: use idle, running, waiting, errored, paused or closed", strconv.Quote(f.Status))
	}
	if f.Agent != "" {
		if err := wirerules.CheckAgent(f.Agent); err != nil {
			return f, err
		}
	}
	for _, id := range []struct{ name, val string }{{"parent", f.Parent}, {"forked_from", f.ForkedFrom}, {"q", f.Query}} {
		if id.val != "" {
			if err := wirerules.CheckID(id.name, id.val); err != nil {
				return f, err
			}
		}
	}
	labels, err := readLabels(v["label"], filterLabels)
	if err != nil {
		return f, err
	}
	f.Labels = labels
	for i, tf := range timeFields {
		text := get(tf.Name)
		ms, err := parseTimeBound(text, now)
		if err != nil {
			return f, fmt.Errorf("%s %s: %v", tf.Name, strconv.Quote(text), err)
		}
		f.Times[i] = timeBound{Text: text, Ms: ms}
	}
	for _, r := range []struct{ since, before int }{{createdSince, createdBefore}, {updatedSince, updatedBefore}} {
		s, b := f.Times[r.since], f.Times[r.before]
		if s.Ms != 0 && b.Ms != 0 && s.Ms >= b.Ms {
			return f, fmt.Errorf("%s (%s) is not earlier than %s (%s): no session could match", timeFields[r.since].Name, s.Text, timeFields[r.before].Name, b.Text)
		}
	}
	switch f.Order = get("order"); f.Order {
	case "":
		f.Order = "created"
	case "created", "updated":
	default:
		return f, fmt.Errorf("order %s: use created or updated", strconv.Quote(f.Order))
	}
	switch dir := get("dir"); dir {
	case "", "newest":
	case "oldest":
		f.Oldest = true
	default:
		return f, fmt.Errorf("dir %s: use newest or oldest", strconv.Quote(dir))
	}
	return f, nil
}

// parseTimeBound reads a time bound: a duration (1h, 30m: that long
// before now), an RFC 3339 time or a date YYYY-MM-DD (its midnight UTC).
// "" is no bound (0).
func parseTimeBound(text string, now time.Time) (int64, error) {
	if text == "" {
		return 0, nil
	}
	var at time.Time
	if d, err := time.ParseDuration(text); err == nil {
		if d <= 0 {
			return 0, fmt.Errorf("a duration ago is more than zero")
		}
		at = now.Add(-d)
	} else if t, err := time.Parse(time.RFC3339, text); err == nil {
		at = t
	} else if t, err := time.Parse(time.DateOnly, text); err == nil {
		at = t
	} else {
		return 0, fmt.Errorf("write a duration ago (1h, 30m), an RFC 3339 time (2026-01-02T15:04:05Z) or a date (2026-01-02)")
	}
	if at.UnixMilli() <= 0 {
		return 0, fmt.Errorf("the time is not after 1970-01-01")
	}
	return at.UnixMilli(), nil
}

func statusOf(name string) dexv1.SessionStatus {
	for _, s := range statusFilters {
		if wirerules.SessionStatusName(s) == name {
			return s
		}
	}
	return dexv1.SessionStatus_SESSION_STATUS_UNSPECIFIED
}

// Unfiltered: no status, agent, label, parent, fork source or time is
// given (the id lookup aside).
func (f listFilter) Unfiltered() bool {
	return filterEmpty(f.bulk())
}

func filterEmpty(bf *dexv1.BulkFilter) bool {
	return bf.Status == dexv1.SessionStatus_SESSION_STATUS_UNSPECIFIED && bf.Agent == "" && len(bf.Labels) == 0 && bf.ParentId == "" && bf.ForkedFrom == "" &&
		bf.CreatedFromMs == 0 && bf.CreatedToMs == 0 && bf.UpdatedFromMs == 0 && bf.UpdatedToMs == 0
}

// request is the ListSessions request of one page of the filter, from the
// token of the page before ("" for the first).
func (f listFilter) request(size int, token string) *dexv1.ListSessionsRequest {
	order := dexv1.SessionOrder_SESSION_ORDER_CREATED
	if f.Order == "updated" {
		order = dexv1.SessionOrder_SESSION_ORDER_UPDATED
	}
	return &dexv1.ListSessionsRequest{
		PageSize: uint32(size), PageToken: token, Status: statusOf(f.Status), Agent: f.Agent, Labels: f.Labels,
		ParentId: f.Parent, ForkedFrom: f.ForkedFrom,
		CreatedAfterMs: f.Times[createdSince].Ms, CreatedBeforeMs: f.Times[createdBefore].Ms,
		UpdatedAfterMs: f.Times[updatedSince].Ms, UpdatedBeforeMs: f.Times[updatedBefore].Ms,
		OrderBy: order, Descending: !f.Oldest,
	}
}

// bulk is the filter as a bulk job takes it: every field of the list's
// filter has its place in BulkFilter (the order does not matter to a job;
// the id lookup is never a filter).
func (f listFilter) bulk() *dexv1.BulkFilter {
	return &dexv1.BulkFilter{
		Status: statusOf(f.Status), Agent: f.Agent, Labels: f.Labels, ParentId: f.Parent, ForkedFrom: f.ForkedFrom,
		CreatedFromMs: f.Times[createdSince].Ms, CreatedToMs: f.Times[createdBefore].Ms,
		UpdatedFromMs: f.Times[updatedSince].Ms, UpdatedToMs: f.Times[updatedBefore].Ms,
	}
}

// values is the filter as a query, with another status; the times as
// typed, so a duration stays one in a link.
func (f listFilter) values(status string) url.Values {
	v := url.Values{}
	if status != "" {
		v.Set("status", status)
	}
	if f.Agent != "" {
		v.Set("agent", f.Agent)
	}
	for _, l := range f.Labels {
		v.Add("label", l.Key+"="+l.Value)
	}
	if f.Parent != "" {
		v.Set("parent", f.Parent)
	}
	if f.ForkedFrom != "" {
		v.Set("forked_from", f.ForkedFrom)
	}
	for i, tf := range timeFields {
		if t := f.Times[i].Text; t != "" {
			v.Set(tf.Name, t)
		}
	}
	if f.Order == "updated" {
		v.Set("order", "updated")
	}
	if f.Oldest {
		v.Set("dir", "oldest")
	}
	return v
}

// LabelTexts are the label filters as typed (KEY=VALUE).
func (f listFilter) LabelTexts() []string {
	out := make([]string, 0, len(f.Labels))
	for _, l := range f.Labels {
		out = append(out, l.Key+"="+l.Value)
	}
	return out
}

// TimeInputs are the time bounds for the filter form.
func (f listFilter) TimeInputs() []timeInput {
	out := make([]timeInput, len(timeFields))
	for i, tf := range timeFields {
		out[i] = timeInput{Name: tf.Name, Label: tf.Label, Text: f.Times[i].Text}
		if ms := f.Times[i].Ms; ms != 0 {
			out[i].At = time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
		}
	}
	return out
}

// timeInput is a time bound as typed, and as the instant it resolved to
// (RFC 3339, "" for none): the bulk form posts the instant, so a job acts
// on the sessions the page listed even when the bound was a duration ago.
type timeInput struct{ Name, Label, Text, At string }

// Text says what the filter keeps, for the page and the bulk form.
func (f listFilter) Text() string {
	return filterText(f.bulk())
}

// filterText says what a bulk filter keeps ("every session" when nothing).
func filterText(bf *dexv1.BulkFilter) string {
	var parts []string
	if bf.GetStatus() != dexv1.SessionStatus_SESSION_STATUS_UNSPECIFIED {
		parts = append(parts, "status "+wirerules.SessionStatusName(bf.Status))
	}
	if bf.GetAgent() != "" {
		parts = append(parts, "agent "+bf.Agent)
	}
	for _, l := range bf.GetLabels() {
		parts = append(parts, "label "+l.Key+"="+l.Value)
	}
	if bf.GetParentId() != "" {
		parts = append(parts, "parent "+bf.ParentId)
	}
	if bf.GetForkedFrom() != "" {
		parts = append(parts, "forks of "+bf.ForkedFrom)
	}
	for _, b := range []struct {
		label string
		ms    int64
	}{{"created since", bf.GetCreatedFromMs()}, {"created before", bf.GetCreatedToMs()}, {"updated since", bf.GetUpdatedFromMs()}, {"updated before", bf.GetUpdatedToMs()}} {
		if b.ms != 0 {
			parts = append(parts, b.label+" "+fmtMs(b.ms))
		}
	}
	if len(parts) == 0 {
		return "every session"
	}
	return strings.Join(parts, ", ")
}
