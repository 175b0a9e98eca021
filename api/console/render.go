package console

import (
	"github.com/dustin/go-humanize"

	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"strings"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/wirerules"
)

// page is what every template gets.
type page struct {
	Title string
	Nav   string
	CSRF  string
	Where *Where
	ACL   bool
	// LoggedIn: a token cookie is set (a logout button is shown).
	LoggedIn bool
	Error    string
	Notice   string
	// Banner is the cluster-wide trouble shown on top of every page (too
	// few voters answer to elect a leader), "" when none is known.
	Banner string
	// CanWrite: the caller's token may act (see roles.go); the action
	// forms are shown only then.
	CanWrite bool
	// Refresh, when set, reloads the page (a meta refresh: "SECONDS; url=…"),
	// as a running bulk job's page does.
	Refresh string
	Data    any
}

var funcs = template.FuncMap{
	"ms":      fmtMs,
	"since":   sinceMs,
	"status":  func(s dexv1.SessionStatus) string { return wirerules.SessionStatusName(s) },
	"kind":    kindName,
	"outcome": func(o dexv1.Outcome) string { return wirerules.OutcomeName(o) },
	"stepst":  stepStatus,
	"attst":   func(s dexv1.AttemptStatus) string { return enumName(s.String(), "ATTEMPT_STATUS_") },
	"errtype": func(e dexv1.ErrorType) string { return enumName(e.String(), "ERROR_TYPE_") },
	"access":  func(a dexv1.ToolAccess) string { return enumName(a.String(), "TOOL_ACCESS_") },
	"hkind":   func(k dexv1.HistoryKind) string { return enumName(k.String(), "HISTORY_KIND_") },
	"pause":   func(p dexv1.PauseReason) string { return enumName(p.String(), "PAUSE_REASON_") },
	"pretty":  prettyJSON,
	"add":     func(a, b int) int { return a + b },
	"add64":   func(a, b uint64) uint64 { return a + b },
	"budget":  wirerules.BudgetText,
	"shell":   shellQuote,
	"agent":   agentLabel,
	"bytes":   humanize.Bytes,
	"until":   untilMs,
	"ago":     agoMs,
	"took":    tookMs,
	// The partition a session id lives in, of n.
	"partition": wirerules.PartitionOf,
	"first":     firstLine,
	"nodes":     nodeList,
	// A session's dispatch order as the cluster applies it: 0 is the
	// default priority 3 and weight 1.
	"priority": func(p uint32) uint32 { return cmp.Or(p, 3) },
	"weight":   func(w uint32) uint32 { return cmp.Or(w, 1) },
	"list":     func(s ...string) []string { return s },
	// The bulk form's actions, in order.
	"maxlistcalls": func() int { return maxListCalls },
	"bulkactions":  func() []string { return []string{"cancel", "resume", "close", "delete", "label"} },
}

func parseTemplates() map[string]*template.Template {
	out := map[string]*template.Template{}
	// A page's template, and the parts it includes beside the layout.
	parts := map[string][]string{"session": {"templates/manage.html"}}
	for _, name := range []string{"sessions", "session", "start", "fork", "schedules", "bulkjobs", "bulkjob", "cluster", "chaos", "login", "error"} {
		files := append([]string{"templates/layout.html", "templates/" + name + ".html"}, parts[name]...)
		out[name] = template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFS, files...))
	}
	return out
}

// render writes a page; a failed render is a 500 with nothing half written.
func (c *Console) render(w http.ResponseWriter, r *http.Request, code int, name string, p page) {
	p.CSRF = csrfToken(w, r, c.cfg.SecureCookies)
	p.Where = c.where()
	p.ACL = c.cfg.ACL
	_, err := r.Cookie(tokenCookie)
	p.LoggedIn = err == nil
	p.CanWrite = c.canWrite(r)
	var buf bytes.Buffer
	if err := c.tmpl[name].Execute(&buf, p); err != nil {
		http.Error(w, "render "+name+": "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

func (c *Console) renderError(w http.ResponseWriter, r *http.Request, code int, msg string) {
	c.render(w, r, code, "error", page{Title: http.StatusText(code), Error: msg, Data: code})
}

func enumName(s, prefix string) string {
	return strings.ToLower(strings.TrimPrefix(s, prefix))
}

func kindName(k dexv1.StepKind) string { return enumName(k.String(), "STEP_KIND_") }

func stepStatus(s *dexv1.Step) string {
	if s.Status == dexv1.StepStatus_STEP_STATUS_DONE {
		return wirerules.OutcomeName(s.Outcome)
	}
	return enumName(s.Status.String(), "STEP_STATUS_")
}

// prettyJSON indents JSON text; other text is shown as it is.
func prettyJSON(s string) string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, []byte(s), "", "  "); err != nil {
		return s
	}
	return buf.String()
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func plural(n int, one string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", one)
	}
	return fmt.Sprintf("%d %ss", n, one)
}
