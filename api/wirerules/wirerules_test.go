package wirerules

import (
	"strings"
	"testing"
)

type call struct{ tool, id string }

func (c call) GetTool() string   { return c.tool }
func (c call) GetCallId() string { return c.id }

func TestCheckModelOutput(t *testing.T) {
	for _, c := range []struct {
		name  string
		calls []call
		want  string // "" accepted, else a part of the reason
	}{
		{"no calls", nil, ""},
		{"distinct ids", []call{{"a", "c1"}, {"a", "c2"}}, ""},
		{"no tool", []call{{"", "c1"}}, `tool call 1 of the model output (call id "c1") names no tool`},
		{"no call id", []call{{"a", "c1"}, {"b", ""}}, `tool call 2 of the model output (tool "b") has no call id`},
		{"repeated id", []call{{"a", "c1"}, {"b", "c1"}}, `call id "c1" appears twice in one model output (tools "a" and "b")`},
	} {
		err := CheckModelOutput(c.calls)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: CheckModelOutput = %v, want %q", c.name, err, c.want)
		}
	}
}

func TestCheckAgent(t *testing.T) {
	for _, ok := range []string{"", "bot", "bot@2", "team:bot-1.v2"} {
		if err := CheckAgent(ok); err != nil {
			t.Errorf("CheckAgent(%q) = %v, want nil", ok, err)
		}
	}
	for bad, want := range map[string]string{
		"bot/2":                            `agent "bot/2" holds '/': use only ` + IDChars,
		"a..b":                             `agent "a..b" must not be "." or hold ".."`,
		".":                                `agent "." must not be "." or hold ".."`,
		strings.Repeat("a", MaxIDLength+1): "agent is longer than 200 bytes",
	} {
		if err := CheckAgent(bad); err == nil || err.Error() != want {
			t.Errorf("CheckAgent(%.20q) = %v, want %q", bad, err, want)
		}
	}
}

func TestCheckIDRequired(t *testing.T) {
	if err := CheckID("session id", ""); err == nil || err.Error() != "session id is required" {
		t.Fatalf("CheckID empty = %v", err)
	}
	if err := CheckID("session id", strings.Repeat("a", MaxIDLength)); err != nil {
		t.Fatalf("CheckID at the limit = %v", err)
	}
}

func TestNotRunPrefix(t *testing.T) {
	if !strings.HasPrefix(NotRunPrefix, "the tool did not run") {
		t.Fatalf("NotRunPrefix %q", NotRunPrefix)
	}
}

func TestNewSessionIDIsAValidFreshID(t *testing.T) {
	a, b := NewSessionID(), NewSessionID()
	if !strings.HasPrefix(a, "ses-") || len(a) != len("ses-")+16 || a == b {
		t.Fatalf("session ids %q, %q: want two different ses- ids with 16 hex digits", a, b)
	}
	if err := CheckID("session id", a); err != nil {
		t.Fatalf("a new session id is refused: %v", err)
	}
}
