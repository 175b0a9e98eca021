//go:build e2e

// Package prometheus holds the check of the alert rules.
package prometheus

import (
	"os/exec"
	"testing"
)

// The rules must load in Prometheus: promtool (Debian's prometheus
// package, installed by .ci/run) checks their syntax and PromQL.
func TestAlertRulesPassPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not on PATH (apt-get install prometheus); the alert rules are not checked")
	}
	out, err := exec.Command(promtool, "check", "rules", "alerts.yml").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules alerts.yml: %v\n%s", err, out)
	}
}
