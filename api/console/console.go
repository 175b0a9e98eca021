// Package console is Dex's web console: server-rendered pages of the
// sessions, their Steps and waits, the cluster and the last chaos matrix,
// served by every dexd under /ui/. It reads and acts through the same gRPC
// API as dexctl, with the caller's token, so the API's roles and rules
// apply unchanged and its errors are shown in the page.
package console

import (
	"context"
	"embed"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Prefix is where the console is mounted.
const Prefix = "/ui/"

// Where says which node serves the page and where it sees the leader.
type Where struct {
	Node       string
	Role       string // leader, follower, candidate…
	LeaderID   string
	LeaderAddr string // the leader's gRPC address
}

// Config wires the console to its node.
type Config struct {
	// Sessions is a channel that follows the node serving clients (the
	// lease holder), e.g. client.Dial("dex:///…" every member).
	Sessions grpc.ClientConnInterface
	// Admin is a channel to this node itself: Status answers on any node.
	Admin grpc.ClientConnInterface
	// ACL: the cluster wants tokens, so the console asks for one.
	ACL bool
	// ChaosReport is the directory holding the matrix.json of the last
	// `dexchaos matrix` run ("" when none was given).
	ChaosReport string
	// Where reports this node's view of the leader (nil: not shown).
	Where func() Where
	// SecureCookies marks the cookies Secure (the HTTP port speaks TLS).
	SecureCookies bool
	// Timeout bounds each page's API calls (default 5s).
	Timeout time.Duration
}

// Console serves the pages.
type Console struct {
	cfg      Config
	sessions *client.Client
	// svc is the raw SessionService, for the calls client.Client has no
	// method for (CancelSession).
	svc    dexv1.SessionServiceClient
	probes writeProbes
	admin  dexv1.AdminServiceClient
	tmpl   map[string]*template.Template
	mux    *http.ServeMux
	// partitions is the cluster's number of partitions once a Status gave
	// it (0: unknown), see partitions.go.
	partitions atomic.Int32
}

// New returns the console's handler; mount it at Prefix.
func New(cfg Config) *Console {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	c := &Console{cfg: cfg, sessions: client.New(cfg.Sessions), svc: dexv1.NewSessionServiceClient(cfg.Sessions), admin: dexv1.NewAdminServiceClient(cfg.Admin)}
	c.tmpl = parseTemplates()
	static, _ := fs.Sub(staticFS, "static")
	m := http.NewServeMux()
	m.Handle("GET /ui/static/", http.StripPrefix("/ui/static/", http.FileServerFS(static)))
	m.HandleFunc("GET /ui/{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ui/sessions", http.StatusSeeOther)
	})
	m.HandleFunc("GET /ui/login", c.loginPage)
	m.HandleFunc("POST /ui/login", c.login)
	m.HandleFunc("POST /ui/logout", c.logout)
	m.HandleFunc("GET /ui/sessions", c.authed(c.sessionsPage))
	m.HandleFunc("GET /ui/sessions/{id}", c.authed(c.sessionPage))
	m.HandleFunc("GET /ui/sessions/{id}/events", c.authed(c.sessionEvents))
	m.HandleFunc("POST /ui/sessions/{id}/{action}", c.authed(c.sessionAction))
	m.HandleFunc("GET /ui/sessions/{id}/fork", c.authed(c.forkPage))
	m.HandleFunc("POST /ui/sessions/{id}/fork", c.authed(c.fork))
	m.HandleFunc("GET /ui/start", c.authed(c.startPage))
	m.HandleFunc("POST /ui/start", c.authed(c.startSession))
	m.HandleFunc("POST /ui/bulk", c.authed(c.startBulk))
	m.HandleFunc("GET /ui/bulk", c.authed(c.bulkJobsPage))
	m.HandleFunc("GET /ui/bulk/{id}", c.authed(c.bulkJobPage))
	m.HandleFunc("POST /ui/bulk/{id}/cancel", c.authed(c.cancelBulkJob))
	m.HandleFunc("GET /ui/schedules", c.authed(c.schedulesPage))
	m.HandleFunc("POST /ui/schedules", c.authed(c.createSchedule))
	m.HandleFunc("POST /ui/schedules/{id}/{action}", c.authed(c.scheduleAction))
	m.HandleFunc("GET /ui/cluster", c.authed(c.clusterPage))
	m.HandleFunc("GET /ui/chaos", c.authed(c.chaosPage))
	m.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		c.renderError(w, r, http.StatusNotFound, "no such page: "+r.URL.Path)
	})
	c.mux = m
	return c
}

func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'; form-action 'self'")
	w.Header().Set("Referrer-Policy", "same-origin")
	c.mux.ServeHTTP(w, r)
}

const tokenCookie = "dex_token"

// token is the caller's: an Authorization header, else the login cookie.
func token(r *http.Request) string {
	if s, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return strings.TrimSpace(s)
	}
	if ck, err := r.Cookie(tokenCookie); err == nil {
		return ck.Value
	}
	return ""
}

// authed sends a caller without a token to the login form when the
// cluster wants one. Which token may do what is the API's decision.
func (c *Console) authed(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if c.cfg.ACL && token(r) == "" {
			if r.Method == http.MethodGet && r.Header.Get("Accept") != "text/event-stream" {
				http.Redirect(w, r, "/ui/login?next="+template.URLQueryEscaper(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			c.renderError(w, r, http.StatusUnauthorized, "this cluster requires a token: log in at /ui/login")
			return
		}
		h(w, r)
	}
}

// apiContext carries the caller's token to the API and bounds the call.
func (c *Console) apiContext(r *http.Request) (context.Context, context.CancelFunc) {
	ctx := r.Context()
	if t := token(r); t != "" {
		ctx = withToken(ctx, t)
	}
	return context.WithTimeout(ctx, c.cfg.Timeout)
}

func withToken(ctx context.Context, secret string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+secret)
}

func (c *Console) where() *Where {
	if c.cfg.Where == nil {
		return nil
	}
	w := c.cfg.Where()
	return &w
}
