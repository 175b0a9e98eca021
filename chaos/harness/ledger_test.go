package harness

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// A ledger of two Workers: a model call, a write tool run twice (a Worker
// kill after its start line) that reports no effects, a tool that reports
// its effects, a demo Worker line and a line torn by a kill.
const sampleLedger = `{"session":"s1","step":"m1","attempt":1,"kind":"model","tool":"","phase":"start"}
{"session":"s1","step":"m1","attempt":1,"kind":"model","tool":"","phase":"end","outcome":"ok"}
{"session":"s1","step":"t1","attempt":1,"kind":"tool","tool":"send_invoice","idempotency_key":"dex:s1:c1","phase":"start"}
{"session":"s1","step":"t1","attempt":2,"kind":"tool","tool":"send_invoice","idempotency_key":"dex:s1:c1","phase":"start"}
{"session":"s1","step":"t1","attempt":2,"kind":"tool","tool":"send_invoice","idempotency_key":"dex:s1:c1","phase":"end","outcome":"ok"}
{"session":"s1","step":"t2","attempt":1,"kind":"tool","tool":"charge","idempotency_key":"dex:s1:c2","phase":"start"}
{"session":"s1","step":"t2","attempt":1,"kind":"tool","tool":"charge","idempotency_key":"dex:s1:c2","phase":"end","outcome":"error"}
{"session":"s1","step":"t2","attempt":2,"kind":"tool","tool":"charge","idempotency_key":"dex:s1:c2","phase":"start"}
{"session":"s1","step":"t2","attempt":2,"kind":"tool","tool":"charge","idempotency_key":"dex:s1:c2","phase":"effect","effect":"stripe.charge","effect_key":"inv-7"}
{"session":"s1","step":"t2","attempt":2,"kind":"tool","tool":"charge","idempotency_key":"dex:s1:c2","phase":"end","outcome":"ok"}
{"session":"s1","step":"t3","attempt":1,"kind":"tool","tool":"lookup","idempotency_key":""}

{"session":"s1","step":"t3","attempt":2,"kind":"tool","tool":"loo`

func writeLedger(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ledger.jsonl")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestReadLedgerSkipsTornLastLine(t *testing.T) {
	entries, err := ReadLedger(writeLedger(t, sampleLedger))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 11 {
		t.Fatalf("%d entries, want 11", len(entries))
	}
	if e := entries[8]; !e.IsEffect() || e.Effect != "stripe.charge" || e.EffectKey != "inv-7" || e.Attempt != 2 {
		t.Fatalf("effect line %+v", e)
	}
	if e := entries[10]; !e.IsStart() || e.Phase != "" {
		t.Fatalf("a demo Worker line is a start: %+v", e)
	}
	if got, err := ReadLedger(filepath.Join(t.TempDir(), "none")); err != nil || got != nil {
		t.Fatalf("missing ledger: %v %v", got, err)
	}
}

func TestReadLedgerRefusesABadLine(t *testing.T) {
	_, err := ReadLedger(writeLedger(t, "{\"session\":\"s1\"}\nnot json\n"))
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("err %v, want one naming line 2", err)
	}
}

func TestExecutionsCount(t *testing.T) {
	entries, err := ReadLedger(writeLedger(t, sampleLedger))
	if err != nil {
		t.Fatal(err)
	}
	// charge reports its effects: one, though its handler started twice.
	wantSteps := map[StepTool]int{{"m1", ""}: 1, {"t1", "send_invoice"}: 2, {"t2", "charge"}: 1, {"t3", "lookup"}: 1}
	if got := ExecutionsByStepTool(entries); !reflect.DeepEqual(got, wantSteps) {
		t.Fatalf("by Step and tool %v, want %v", got, wantSteps)
	}
	wantKeys := map[string]int{"dex:s1:c1": 2, "inv-7": 1, "": 1}
	if got := ExecutionsByKey(entries); !reflect.DeepEqual(got, wantKeys) {
		t.Fatalf("by key %v, want %v", got, wantKeys)
	}
	// Executions counts what counts: charge by its effect, a start and its
	// end line once.
	if n := Executions(entries, "s1", func(e LedgerEntry) bool { return e.Tool == "charge" }); n != 1 {
		t.Fatalf("charge executions %d, want 1", n)
	}
	if n := Executions(entries, "s1", func(e LedgerEntry) bool { return e.Tool == "send_invoice" }); n != 2 {
		t.Fatalf("send_invoice executions %d, want 2", n)
	}
}
