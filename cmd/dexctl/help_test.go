package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The help of every flag reads as written: a backquoted word in a flag's
// help becomes the name of its value in the usage line.
func TestFlagHelpReadsAsWritten(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		check := func(f *pflag.Flag) {
			if strings.Contains(f.Usage, "`") {
				t.Errorf("%s --%s: help %q has a backquote", c.CommandPath(), f.Name, f.Usage)
			}
		}
		c.LocalFlags().VisitAll(check)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd())

	out, err := run(t, "--help")
	if err != nil || !strings.Contains(out, "--tls-cert string ") || strings.Contains(out, "--tls-cert dexctl") {
		t.Errorf("dexctl --help: %v; want --tls-cert string in:\n%s", err, out)
	}
	// As the API says: 0 is the cluster's default, not "never".
	out, err = run(t, "session", "start", "--help")
	if err != nil || !strings.Contains(out, "0: the cluster's default") || strings.Contains(out, "0: never") {
		t.Errorf("session start --help: %v; want --compaction-threshold 0 to be the cluster's default:\n%s", err, out)
	}
}
