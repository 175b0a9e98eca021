//go:build e2e

package chaos

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"sigs.k8s.io/yaml"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/chaos/harness"
)

// Every metric the Grafana dashboard and the alert rules query exists on a
// running node once it has done some work: a demo session (model, tools,
// dispatch, claims), and one rejected command.
func TestMetrics_DashboardAndAlertsQueryExistingMetrics(t *testing.T) {
	wanted := map[string][]string{} // metric -> where it is queried
	for _, e := range dashboardExprs(t, "../deploy/grafana/dex.json") {
		for _, m := range metricNames(e) {
			wanted[m] = append(wanted[m], "dashboard")
		}
	}
	for _, e := range alertExprs(t, "../deploy/prometheus/alerts.yml") {
		for _, m := range metricNames(e) {
			wanted[m] = append(wanted[m], "alerts")
		}
	}
	if len(wanted) < 15 {
		t.Fatalf("only %d metrics found in the dashboard and rules: %v", len(wanted), wanted)
	}

	dir := t.TempDir()
	c, err := harness.NewCluster(harness.ClusterOptions{BinDir: binDir, Dir: dir, Size: 1, Args: fastArgs})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, dir: dir, cluster: c, ledger: filepath.Join(dir, "ledger.jsonl")}
	t.Cleanup(e.stop)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	leader := e.waitReady()
	if e.conn, err = client.Dial(c.Target()); err != nil {
		t.Fatal(err)
	}
	e.client = client.New(e.conn)
	e.startWorker("")
	id := e.createSession("what is the weather?")
	e.waitStatus(id, dexv1.SessionStatus_SESSION_STATUS_IDLE, 30*time.Second)
	// A second session with the same id is committed, then rejected.
	_, err = e.client.CreateSession(e.ctx(10*time.Second), &dexv1.CreateSessionRequest{SessionId: id, Message: "again"})
	if status.Code(err) != codes.AlreadyExists {
		t.Fatalf("creating session %s twice: %v; want AlreadyExists", id, err)
	}

	have := scrape(t, "http://"+leader.HTTPAddr+"/metrics")
	var missing []string
	for m, where := range wanted {
		if !have[m] {
			missing = append(missing, m+" ("+strings.Join(where, ", ")+")")
		}
	}
	sort.Strings(missing)
	t.Logf("%d metrics queried, %d missing", len(wanted), len(missing))
	if len(missing) > 0 {
		t.Fatalf("metrics queried but not exposed by a working node:\n  %s", strings.Join(missing, "\n  "))
	}
}

func dashboardExprs(t *testing.T, path string) []string {
	t.Helper()
	var d struct {
		Panels []struct {
			Targets []struct{ Expr string } `json:"targets"`
		} `json:"panels"`
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var out []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out = append(out, tg.Expr)
		}
	}
	return out
}

func alertExprs(t *testing.T, path string) []string {
	t.Helper()
	var r struct {
		Groups []struct {
			Rules []struct{ Expr string } `json:"rules"`
		} `json:"groups"`
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &r); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var out []string
	for _, g := range r.Groups {
		for _, rule := range g.Rules {
			out = append(out, rule.Expr)
		}
	}
	return out
}

var (
	// Label matchers, groupings and strings name labels, not metrics.
	promLabels   = regexp.MustCompile(`\{[^}]*\}|\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)|"[^"]*"`)
	promMetric   = regexp.MustCompile(`\b(dex_|raft_|grpc_)[A-Za-z0-9_:]*`)
	metricSample = regexp.MustCompile(`^([A-Za-z_:][A-Za-z0-9_:]*)`)
)

// metricNames reads a PromQL expression loosely: the identifiers that start
// like Dex's, raft's or gRPC's metrics, outside label matchers and groupings.
func metricNames(expr string) []string {
	return promMetric.FindAllString(promLabels.ReplaceAllString(expr, " "), -1)
}

// scrape returns the sample names a /metrics page exposes.
func scrape(t *testing.T, url string) map[string]bool {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	have := map[string]bool{}
	for _, line := range strings.Split(string(body), "\n") {
		if m := metricSample.FindString(line); m != "" {
			have[m] = true
		}
	}
	return have
}
