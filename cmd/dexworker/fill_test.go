package main

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

const fillScript = `{"turns": [
 {"match": "big", "prefix": true, "outputs": [
   {"tool_calls": [{"tool": "lookup", "arguments": {"q": "{{fill:1000}}", "m": "{{message}}"}}], "text": "{{fill:3}}!"},
   {"error": {"type": "server_error", "message": "{{fill:2048}}"}}]}
], "compact": [{"text": "{{fill:10}}"}]}`

// {{fill:N}} makes outputs, arguments, error texts and summaries of the
// size asked; a message that holds the directive is never expanded.
func TestFillMakesOutputsOfTheSizeAsked(t *testing.T) {
	m, _ := newModel(t, fillScript)
	ctx := context.Background()
	out, err := m.RunModel(ctx, client.ModelInput{SessionID: "s", Attempt: 1, History: hist(user("big {{fill:99}}"))})
	if err != nil || out.Text != "abc!" || len(out.ToolCalls) != 1 {
		t.Fatalf("output %v, %v", out, err)
	}
	var args struct{ Q, M string }
	if err := json.Unmarshal([]byte(out.ToolCalls[0].Arguments), &args); err != nil {
		t.Fatal(err)
	}
	if len(args.Q) != 1000 || strings.Trim(args.Q, fillAlphabet) != "" || args.M != "big {{fill:99}}" {
		t.Fatalf("arguments %q…, message %q", args.Q[:30], args.M)
	}
	_, err = m.RunModel(ctx, client.ModelInput{SessionID: "s", Attempt: 1, History: hist(user("big"), assistant(), result())})
	var me *client.ModelError
	if !errors.As(err, &me) || me.Type != dexv1.ErrorType_ERROR_TYPE_SERVER_ERROR || len(me.Msg) != 2048 {
		t.Fatalf("error %v", err)
	}
	if s, err := m.Compact(ctx, client.ModelInput{Attempt: 1, History: hist(user("big"))}); err != nil || s != "abcdefghij" {
		t.Fatalf("summary %q, %v", s, err)
	}
}

func TestFillOverItsBoundIsRefused(t *testing.T) {
	for _, bad := range []string{
		`{"turns": [{"match": "x", "outputs": [{"text": "{{fill:67108865}}"}]}]}`,
		`{"turns": [{"match": "x", "outputs": [{"error": {"type": "timeout", "message": "{{fill:99999999999999999999}}"}}]}]}`,
		`{"turns": [{"match": "x", "outputs": [{"tool_calls": [{"tool": "lookup", "arguments": {"q": "{{fill:100000000}}"}}]}]}]}`,
	} {
		if _, err := ParseScript([]byte(bad)); err == nil || !strings.Contains(err.Error(), "{{fill:") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

// "result_bytes": N makes a demo tool answer exactly N bytes.
func TestResultBytes(t *testing.T) {
	l, err := OpenLedger(filepath.Join(t.TempDir(), "ledger.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	d := &demoTools{ledger: l, worker: "w", polls: map[string]int{}}
	run := d.simple("found")
	for _, n := range []int{3, 6, 5000} {
		res, err := run(context.Background(), client.ToolCall{SessionID: "s", CallID: "c", Tool: "lookup", Attempt: 1, Arguments: `{"result_bytes":` + strconv.Itoa(n) + `}`})
		if err != nil || len(res.Content) != n || !strings.HasPrefix("found "+fillAlphabet, res.Content[:min(n, 8)]) {
			t.Fatalf("result_bytes %d: %d bytes %q…, %v", n, len(res.Content), res.Content[:min(n, 10)], err)
		}
	}
}
