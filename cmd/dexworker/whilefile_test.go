package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// An output with while_file exists only while its file does: the same
// tool-result turn is rejected, then hits an outage, then is answered, as
// the files come and go.
func TestScriptedModelWhileFile(t *testing.T) {
	dir := t.TempDir()
	rejecting, outage := filepath.Join(dir, "rejecting"), filepath.Join(dir, "outage")
	script := `{"turns": [{"match": "child", "outputs": [
	  {"tool_calls": [{"tool": "lookup"}]},
	  {"error": {"type": "server_error"}, "always": true, "while_file": "` + outage + `"},
	  {"error": {"type": "invalid_request"}, "always": true, "while_file": "` + rejecting + `"},
	  {"text": "recovered"}]}]}`
	m, _ := newModel(t, script)
	run := func(attempt uint32) (*dexv1.ModelOutput, error) {
		return m.RunModel(context.Background(), client.ModelInput{SessionID: "s", StepID: "st", Attempt: attempt,
			History: hist(user("child"), assistant(), result())})
	}
	errType := func(err error) string {
		var me *client.ModelError
		if !errors.As(err, &me) {
			return "none"
		}
		return strings.ToLower(strings.TrimPrefix(me.Type.String(), "ERROR_TYPE_"))
	}
	touch := func(p string) {
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	touch(rejecting)
	for a := uint32(1); a <= 3; a++ {
		if _, err := run(a); errType(err) != "invalid_request" {
			t.Fatalf("rejecting, attempt %d: %v", a, err)
		}
	}
	os.Remove(rejecting)
	touch(outage)
	if _, err := run(1); errType(err) != "server_error" {
		t.Fatalf("outage: %v", err)
	}
	os.Remove(outage)
	if out, err := run(1); err != nil || out.Text != "recovered" {
		t.Fatalf("after the outage: %v %v", out, err)
	}
	// The first output is not affected by the files.
	touch(outage)
	out, err := m.RunModel(context.Background(), client.ModelInput{SessionID: "s", StepID: "st0", Attempt: 1, History: hist(user("child"))})
	if err != nil || len(out.ToolCalls) != 1 {
		t.Fatalf("first output: %v %v", out, err)
	}
}
