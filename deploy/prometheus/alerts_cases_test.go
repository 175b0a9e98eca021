// Package prometheus holds the checks of the alert rules (alerts.yml) and
// of their cases (alerts_test.yml).
package prometheus

import (
	"os"
	"slices"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// alertRule is one alerting rule of alerts.yml.
type alertRule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

func readRules(t *testing.T) []alertRule {
	t.Helper()
	var f struct {
		Groups []struct {
			Name  string      `json:"name"`
			Rules []alertRule `json:"rules"`
		} `json:"groups"`
	}
	readYAML(t, "alerts.yml", &f)
	var out []alertRule
	for _, g := range f.Groups {
		out = append(out, g.Rules...)
	}
	if len(out) == 0 {
		t.Fatal("alerts.yml has no rule")
	}
	return out
}

// ruleCases is alerts_test.yml, promtool's rule test file.
type ruleCases struct {
	RuleFiles          []string `json:"rule_files"`
	EvaluationInterval string   `json:"evaluation_interval"`
	Tests              []struct {
		Name        string `json:"name"`
		Interval    string `json:"interval"`
		InputSeries []struct {
			Series string `json:"series"`
			Values string `json:"values"`
		} `json:"input_series"`
		AlertRuleTest []struct {
			EvalTime  string `json:"eval_time"`
			Alertname string `json:"alertname"`
			ExpAlerts []struct {
				ExpLabels      map[string]string `json:"exp_labels"`
				ExpAnnotations map[string]string `json:"exp_annotations"`
			} `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// An alert pages someone: it says what is wrong and what to look at, how
// bad it is, and waits out a blip before it fires.
func TestAlerts_EachSaysWhatHowBadAndWaitsOutABlip(t *testing.T) {
	for _, r := range readRules(t) {
		if r.Alert == "" {
			t.Errorf("a recording rule in alerts.yml (%q): this file holds alerts only", r.Expr)
			continue
		}
		if s := r.Labels["severity"]; s != "warning" && s != "critical" {
			t.Errorf("%s: severity %q; want warning or critical", r.Alert, s)
		}
		if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
			t.Errorf("%s: want both a summary and a description, have %v", r.Alert, r.Annotations)
		}
		if d, err := time.ParseDuration(r.For); err != nil || d < time.Minute {
			t.Errorf("%s: for: %q; want a minute or more", r.Alert, r.For)
		}
	}
}

// alerts_test.yml holds, for every alert, a case where it fires and one
// where it must not, and no case of an alert that does not exist.
func TestAlerts_EachHasACaseWhereItFiresAndOneWhereItDoesNot(t *testing.T) {
	var cases ruleCases
	readYAML(t, "alerts_test.yml", &cases)
	if !slices.Equal(cases.RuleFiles, []string{"alerts.yml"}) {
		t.Fatalf("alerts_test.yml tests the rule files %v; want [alerts.yml]", cases.RuleFiles)
	}
	fires, quiet := map[string]int{}, map[string]int{}
	for _, tc := range cases.Tests {
		for _, at := range tc.AlertRuleTest {
			if len(at.ExpAlerts) > 0 {
				fires[at.Alertname]++
			} else {
				quiet[at.Alertname]++
			}
		}
	}
	known := map[string]bool{}
	for _, r := range readRules(t) {
		known[r.Alert] = true
		if fires[r.Alert] == 0 {
			t.Errorf("%s: no case in alerts_test.yml where it fires", r.Alert)
		}
		if quiet[r.Alert] == 0 {
			t.Errorf("%s: no case in alerts_test.yml where it must not fire", r.Alert)
		}
	}
	for name := range fires {
		if !known[name] {
			t.Errorf("alerts_test.yml expects %s, which alerts.yml does not have", name)
		}
	}
	for name := range quiet {
		if !known[name] {
			t.Errorf("alerts_test.yml checks %s, which alerts.yml does not have", name)
		}
	}
}
