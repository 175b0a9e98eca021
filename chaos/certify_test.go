package chaos

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeTools(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tools.json")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCertifyTools_BadFilesSayWhatIsWrong(t *testing.T) {
	bad := map[string]string{
		`{"tools": []}`: "no tools",
		`{"tools": [{"name": "a b", "policy": "read"}]}`:                                `name "a b"`,
		`{"tools": [{"name": "a", "policy": "write"}]}`:                                 `policy "write" must be read, idempotent_write or single_attempt`,
		`{"tools": [{"name": "a", "policy": "read"}, {"name": "a", "policy": "read"}]}`: `"a" listed twice`,
		`{"tools": [{"name": "a", "policy": "read", "arguments": [1]}]}`:                "arguments must be a JSON object",
		`{"tools": [{"name": "a", "policy": "read", "access": "read"}]}`:                `unknown field "access"`,
		`{"tools": `: "unexpected EOF",
	}
	for text, want := range bad {
		if _, err := LoadCertifyTools(writeTools(t, text)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want an error with %q", text, err, want)
		}
	}
	tools, err := LoadCertifyTools(writeTools(t, `{"tools": [{"name": "send_invoice", "policy": "idempotent_write", "arguments": {"a": 1}}]}`))
	if err != nil || len(tools) != 1 || tools[0].Policy != PolicyIdempotentWrite {
		t.Fatalf("a good file: %+v, %v", tools, err)
	}
}

// Every row certify plays is a valid scenario, and each policy gets the
// rows of its Step kind.
func TestCertifyRows_ValidForEveryPolicy(t *testing.T) {
	rows := CertifyRows([]CertifyTool{
		{Name: "lookup_order", Policy: PolicyRead}, {Name: "send_invoice", Policy: PolicyIdempotentWrite},
		{Name: "charge_card", Policy: PolicySingleAttempt, Arguments: []byte(`{"cents": 5}`)},
	})
	var names []string
	for _, r := range rows {
		if err := r.scenario.validate(); err != nil {
			t.Errorf("%s: %v", r.Name(), err)
		}
		names = append(names, r.Name())
	}
	want := []string{
		"RunModel | before any output reaches the cluster",
		"RunModel | after output reached the cluster",
		"CallTool, read `lookup_order` | before the first heartbeat reaches the cluster",
		"CallTool, read `lookup_order` | while the tool runs (it ran; its result not sent)",
		"CallTool, idempotent write `send_invoice` | before the first heartbeat reaches the cluster",
		"CallTool, idempotent write `send_invoice` | while the tool runs (it ran; its result not sent)",
		"CallSingleAttemptTool `charge_card` | before the first heartbeat reaches the cluster",
		"CallSingleAttemptTool `charge_card` | while the tool runs (it ran; its result not sent)",
		"idle session | waiting for a user message",
	}
	if strings.Join(names, "\n") != strings.Join(want, "\n") {
		t.Fatalf("rows:\n%s\nwant:\n%s", strings.Join(names, "\n"), strings.Join(want, "\n"))
	}
	if got := string(rows[6].scenario.script.Turns[0].Outputs[0].ToolCalls[0].Arguments); got != `{"cents": 5}` {
		t.Fatalf("the scripted call's arguments %s", got)
	}
	cells, err := SelectCertifyCells(rows, nil, "charge_card")
	if err != nil || len(cells) != 2*len(CertifyColumns) {
		t.Fatalf("cells of charge_card: %d, %v", len(cells), err)
	}
	if _, err := SelectCertifyCells(rows, []string{ColLeaderPause}, ""); err == nil || !strings.Contains(err.Error(), `unknown column "leader-pause" (known: worker-kill, server-restart, takeover)`) {
		t.Fatalf("a column certify does not run: %v", err)
	}
	if _, err := SelectCertifyCells(rows, nil, "("); err == nil {
		t.Fatal("a bad --row accepted")
	}
}

func TestCertifyReport_JUnitAndReproduce(t *testing.T) {
	fail := CellResult{Step: "CallTool, idempotent write `send_invoice`", Moment: "while the tool runs (it ran; its result not sent)",
		Column: ColWorkerKill, Result: ResultFail, Reason: "tool `send_invoice` ran 2 times", Seconds: 4.2, Logs: "out/failed/x"}
	fail.Reproduce = Reproduce(fail, "tools.json", []string{"python3", "my worker.py"})
	want := `dexchaos certify --tools tools.json --columns worker-kill --row '^CallTool, idempotent write ` + "`send_invoice`" + ` \| while the tool runs \(it ran; its result not sent\)$' --keep-logs -- python3 'my worker.py'`
	if fail.Reproduce != want {
		t.Fatalf("reproduce:\n%s\nwant:\n%s", fail.Reproduce, want)
	}
	rep := Report{Wall: 90 * time.Second, Cells: []CellResult{
		{Step: "RunModel", Moment: "m", Column: ColTakeover, Result: ResultPass, Seconds: 2},
		fail,
		{Step: "idle session", Moment: "m", Column: ColServerRestart, Result: ResultNA, Reason: "why"},
	}}
	b, err := rep.JUnit("dexchaos certify")
	if err != nil {
		t.Fatal(err)
	}
	var got junitSuites
	if err := xml.Unmarshal(b, &got); err != nil {
		t.Fatalf("%v:\n%s", err, b)
	}
	s := got.Suites[0]
	if s.Tests != 3 || s.Failures != 1 || s.Skipped != 1 || len(s.Cases) != 3 {
		t.Fatalf("suite %+v", s)
	}
	f := s.Cases[1].Failure
	if s.Cases[1].Class != ColWorkerKill || f == nil || f.Message != fail.Reason || !strings.Contains(f.Text, "reproduce: "+want) || !strings.Contains(f.Text, "logs: out/failed/x") {
		t.Fatalf("the failed case: %+v %+v", s.Cases[1], f)
	}
	if s.Cases[2].Skipped == nil || s.Cases[0].Failure != nil {
		t.Fatalf("cases %+v", s.Cases)
	}
}
