package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCertify_BadUsageExits2AndSaysWhy(t *testing.T) {
	tools := filepath.Join(t.TempDir(), "tools.json")
	if err := os.WriteFile(tools, []byte(`{"tools": [{"name": "charge", "policy": "charge_once"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := []struct {
		args []string
		want string
	}{
		{[]string{"certify", "--tools", tools}, "no Worker command: give it after --"},
		{[]string{"certify", "--tools", tools, "--", "w"}, `policy "charge_once" must be`},
		{[]string{"certify", "--tools", "no-such.json", "--", "w"}, "no-such.json"},
		{[]string{"certify", "--columns", "leader-pause", "--", "w"}, `unknown column "leader-pause" (known: worker-kill, server-restart, takeover)`},
		{[]string{"certify", "--list"}, "--list needs --tools"},
	}
	for _, b := range bad {
		var out, errb bytes.Buffer
		if code := run(b.args, &out, &errb); code != 2 || !strings.Contains(errb.String(), b.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", b.args, code, errb.String(), b.want)
		}
	}
}
