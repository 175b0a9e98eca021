package console

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/wirerules"
)

// listFilter is what the sessions list is narrowed to: a status, an agent
// and labels (the API's own filter, so a bulk job can act on exactly it),
// and a search by id (the console's, which no bulk job can take).
type listFilter struct {
	Status string
	Agent  string
	Labels []*dexv1.Label
	Query  string
}

// readFilter reads a filter from a query or a form: status, agent, q and
// label=KEY=VALUE (repeated). It refuses what the API would.
func readFilter(v url.Values) (listFilter, error) {
	f := listFilter{Status: strings.TrimSpace(v.Get("status")), Agent: strings.TrimSpace(v.Get("agent")), Query: strings.TrimSpace(v.Get("q"))}
	if f.Status != "" && statusOf(f.Status) == dexv1.SessionStatus_SESSION_STATUS_UNSPECIFIED {
		return f, fmt.Errorf("unknown status %s: use idle, running, waiting, errored, paused or closed", strconv.Quote(f.Status))
	}
	if f.Agent != "" {
		if err := wirerules.CheckAgent(f.Agent); err != nil {
			return f, err
		}
	}
	seen := map[string]bool{}
	for _, l := range v["label"] {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		k, val, ok := strings.Cut(l, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return f, fmt.Errorf("label filter %q: write KEY=VALUE", l)
		}
		if seen[k] {
			return f, fmt.Errorf("label %q is filtered on twice", k)
		}
		seen[k] = true
		f.Labels = append(f.Labels, &dexv1.Label{Key: k, Value: strings.TrimSpace(val)})
	}
	return f, nil
}

func statusOf(name string) dexv1.SessionStatus {
	for _, s := range statusFilters {
		if wirerules.SessionStatusName(s) == name {
			return s
		}
	}
	return dexv1.SessionStatus_SESSION_STATUS_UNSPECIFIED
}

// Unfiltered: no status, agent or label is given (the id search aside).
func (f listFilter) Unfiltered() bool {
	return f.Status == "" && f.Agent == "" && len(f.Labels) == 0
}

// matches is the API's filter (status, agent, every label) and the search.
func (f listFilter) matches(s *dexv1.SessionSummary) bool {
	if f.Status != "" && wirerules.SessionStatusName(s.Status) != f.Status {
		return false
	}
	if f.Agent != "" && s.Agent != f.Agent {
		return false
	}
	for _, want := range f.Labels {
		if !slices.ContainsFunc(s.Labels, func(l *dexv1.Label) bool { return l.Key == want.Key && l.Value == want.Value }) {
			return false
		}
	}
	return f.Query == "" || strings.Contains(s.Id, f.Query)
}

// bulk is the filter as a bulk job takes it (the id search is not part of
// it: a form with one is refused).
func (f listFilter) bulk() *dexv1.BulkFilter {
	return &dexv1.BulkFilter{Status: statusOf(f.Status), Agent: f.Agent, Labels: f.Labels}
}

// values is the filter as a query, with another status.
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
	if f.Query != "" {
		v.Set("q", f.Query)
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
	if len(parts) == 0 {
		return "every session"
	}
	return strings.Join(parts, ", ")
}
