//go:build e2e

package prometheus

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// promtool is Debian's prometheus package's, which CI installs (.ci/run).
// Without it a test skips, but not in CI, where the rules must be checked.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if inCI() {
			t.Fatal("promtool is not on PATH, and CI must check the alert rules (apt-get install prometheus)")
		}
		t.Skip("promtool is not on PATH (apt-get install prometheus); the alert rules are not checked")
	}
	return p
}

// inCI tells CI apart as check-rules.sh does: CI set, and not to false.
func inCI() bool {
	switch os.Getenv("CI") {
	case "", "false", "0":
		return false
	}
	return true
}

// The rules load in Prometheus and pass their cases.
func TestAlertRules_LoadInPromtoolAndPassTheirCases(t *testing.T) {
	p := promtool(t)
	for _, args := range [][]string{{"check", "rules", "alerts.yml"}, {"test", "rules", "alerts_test.yml"}} {
		if out, err := exec.Command(p, args...).CombinedOutput(); err != nil {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// runCheck runs check-rules.sh, make test's check of the rules, or a copy
// of it, with env alone.
func runCheck(t *testing.T, script string, env []string) (string, error) {
	t.Helper()
	cmd := exec.Command("/bin/sh", script)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestAlertRules_MakeTestsCheckRunsTheCases(t *testing.T) {
	promtool(t)
	out, err := runCheck(t, "./check-rules.sh", os.Environ())
	if err != nil {
		t.Fatalf("check-rules.sh: %v\n%s", err, out)
	}
	if !strings.Contains(out, "Unit Testing:  alerts_test.yml") || !strings.Contains(out, "SUCCESS") {
		t.Fatalf("check-rules.sh did not run the cases of alerts_test.yml:\n%s", out)
	}
}

// A rule that breaks one of its cases fails the check: here DexQueueStuck
// made to fire on any queue that is not empty, which a queue that drains
// must not do.
func TestAlertRules_MakeTestsCheckFailsOnABrokenCase(t *testing.T) {
	promtool(t)
	dir := t.TempDir()
	for _, name := range []string{"check-rules.sh", "alerts_test.yml", "alerts.yml"} {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if name == "alerts.yml" {
			const stuck = "min_over_time(dex_queue_depth[5m]) > 0\n          and max_over_time(dex_queue_depth[5m]) == min_over_time(dex_queue_depth[5m])"
			if !strings.Contains(string(data), stuck) {
				t.Fatalf("alerts.yml has no DexQueueStuck expression %q to break", stuck)
			}
			data = []byte(strings.Replace(string(data), stuck, "dex_queue_depth > 0", 1))
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := runCheck(t, filepath.Join(dir, "check-rules.sh"), os.Environ())
	if err == nil {
		t.Fatalf("check-rules.sh passed rules that fail their cases:\n%s", out)
	}
	if !strings.Contains(out, "FAILED") || !strings.Contains(out, "queues that drain, move or grow are not stuck") {
		t.Fatalf("check-rules.sh failed, but not on the case of DexQueueStuck: %v\n%s", err, out)
	}
}

// Without promtool the check says so and skips, except in CI, where it
// fails.
func TestAlertRules_MakeTestsCheckWithoutPromtool(t *testing.T) {
	noPromtool := "PATH=" + t.TempDir()
	out, err := runCheck(t, "./check-rules.sh", []string{noPromtool})
	if err != nil || !strings.Contains(out, "promtool not found: the alert rules are not checked") {
		t.Fatalf("outside CI: %v\n%s\nwant a note and success", err, out)
	}
	for _, ci := range []string{"true", "1"} {
		out, err = runCheck(t, "./check-rules.sh", []string{noPromtool, "CI=" + ci})
		if err == nil || !strings.Contains(out, "CI must check the alert rules") {
			t.Fatalf("CI=%s: %v\n%s\nwant a failure that says why", ci, err, out)
		}
	}
}
