//go:build e2e

package grafana

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// promtool is Debian's prometheus package's, which CI installs (.ci/run).
// Without it the test skips, but not in CI (CI set, not to false).
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		switch os.Getenv("CI") {
		case "", "false", "0":
			t.Skip("promtool is not on PATH (apt-get install prometheus); the dashboard's queries are not evaluated")
		}
		t.Fatal("promtool is not on PATH, and CI must evaluate the dashboard's queries (apt-get install prometheus)")
	}
	return p
}

// Series as dexd exposes them before and after some work, one sample a
// minute for 20 minutes: the gRPC server's exist at zero for every method
// and code, the histograms for every Step kind and command, dex_sessions
// for every status. Only a few have data.
func inputSeries() []map[string]string {
	var in []map[string]string
	add := func(series, values string) {
		in = append(in, map[string]string{"series": series, "values": values})
	}
	flat, perSecond, tenth := "0x20", "0+60x20", "0+6x20"
	methods := map[string][]string{
		"dex.v1.WorkerService":  {"PollTask", "Heartbeat", "ClaimTask"},
		"dex.v1.SessionService": {"CreateSession", "GetSession"},
	}
	for service, ms := range methods {
		for _, m := range ms {
			for _, code := range []string{"OK", "Unavailable", "NotFound", "Canceled"} {
				v := flat
				switch {
				case m == "PollTask" && code == "OK", m == "CreateSession" && code == "OK":
					v = perSecond
				case m == "CreateSession" && code == "NotFound":
					v = tenth
				case m == "PollTask" && code == "Canceled": // a Worker's poll cut short
					v = tenth
				}
				add(fmt.Sprintf(`grpc_server_handled_total{job="dex",instance="n1:7201",grpc_type="unary",grpc_service=%q,grpc_method=%q,grpc_code=%q}`, service, m, code), v)
			}
			// Every call of CreateSession takes 1 to 5 ms.
			for _, le := range []string{"0.001", "0.005", "+Inf"} {
				v := flat
				if m == "CreateSession" && le != "0.001" {
					v = perSecond
				}
				add(fmt.Sprintf(`grpc_server_handling_seconds_bucket{job="dex",instance="n1:7201",grpc_type="unary",grpc_service=%q,grpc_method=%q,le=%q}`, service, m, le), v)
			}
		}
	}
	// Model Steps dispatched in 1 to 5 ms, CreateSession applied in as
	// much; no tool Step, no other command.
	for _, h := range []struct{ metric, label, active, idle string }{
		{"dex_dispatch_latency_seconds_bucket", "kind", "model", "tool"},
		{"dex_apply_duration_seconds_bucket", "command", "CreateSession", "SendMessage"},
	} {
		for _, value := range []string{h.active, h.idle} {
			for _, le := range []string{"0.001", "0.005", "+Inf"} {
				v := flat
				if value == h.active && le != "0.001" {
					v = tenth
				}
				add(fmt.Sprintf(`%s{job="dex",instance="n1:7201",%s=%q,le=%q}`, h.metric, h.label, value, le), v)
			}
		}
	}
	for _, status := range []string{"idle", "running", "waiting", "errored", "paused", "deleted", "closed"} {
		v := flat
		switch status {
		case "idle":
			v = "3x20"
		case "errored":
			v = "2x20"
		}
		add(fmt.Sprintf(`dex_sessions{job="dex",instance="n1:7201",status=%q}`, status), v)
	}
	return in
}

// What each query must draw from inputSeries, by panel title and refId:
// the series with data and none of the others. Quantiles of calls that all
// took 1 to 5 ms: 1 ms + 4 ms × q.
var wantDrawn = map[string]map[string][]sample{
	"gRPC requests": {"A": {
		{`{grpc_service="dex.v1.WorkerService", grpc_method="PollTask"}`, 1.1},
		{`{grpc_service="dex.v1.SessionService", grpc_method="CreateSession"}`, 1.1},
	}},
	"gRPC errors": {"A": {
		{`{grpc_method="CreateSession", grpc_code="NotFound"}`, 0.1},
	}},
	"gRPC latency p99 (unary)": {"A": {
		{`{grpc_method="CreateSession"}`, 0.00496},
	}},
	"Worker polls and heartbeats": {"A": {
		{`{grpc_method="PollTask"}`, 1},
		{`{grpc_method="Heartbeat"}`, 0},
	}},
	"Dispatch latency (ready → held)": {
		"A": {{`{kind="model"}`, 0.003}},
		"B": {{`{kind="model"}`, 0.00496}},
	},
	"Apply duration p99 by command": {"A": {
		{`{command="CreateSession"}`, 0.00496},
	}},
	"Sessions by status": {"A": {
		{`{status="idle"}`, 3},
		{`{status="errored"}`, 2},
	}},
}

type sample struct {
	Labels string  `json:"labels"`
	Value  float64 `json:"value"`
}

// The panels over series that exist at zero draw only the series with data
// (before, the gRPC errors panel drew one line per method and code: some
// 500). The dashboard's queries are evaluated by promtool as written, with
// Grafana's $__rate_interval as 5m.
func TestDashboard_PanelsDrawOnlySeriesWithData(t *testing.T) {
	p := promtool(t)
	type exprTest struct {
		Expr       string   `json:"expr"`
		EvalTime   string   `json:"eval_time"`
		ExpSamples []sample `json:"exp_samples"`
	}
	var tests []exprTest
	found := 0
	for _, pn := range readDashboard(t).Panels {
		want, ok := wantDrawn[pn.Title]
		if !ok {
			continue
		}
		for _, tg := range pn.Targets {
			w, ok := want[tg.RefID]
			if !ok {
				continue
			}
			found++
			tests = append(tests, exprTest{
				Expr:       strings.ReplaceAll(tg.Expr, "$__rate_interval", "5m"),
				EvalTime:   "20m",
				ExpSamples: w,
			})
		}
	}
	wanted := 0
	for _, w := range wantDrawn {
		wanted += len(w)
	}
	if found != wanted {
		t.Fatalf("found %d of the %d queries to evaluate in dex.json: a panel was renamed or lost a query", found, wanted)
	}
	file := map[string]any{
		"evaluation_interval": "1m",
		"tests": []map[string]any{{
			"interval":         "1m",
			"input_series":     inputSeries(),
			"promql_expr_test": tests,
		}},
	}
	data, err := yaml.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "dashboard_test.yml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(p, "test", "rules", path).CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}
