package provider

import (
	"strings"
	"testing"
)

func TestParseScript_Refuses(t *testing.T) {
	for _, c := range []struct{ script, want string }{
		{`{"turns":[]}`, "no turns"},
		{`{"turns":[{"outputs":[{"text":"x"}]}]}`, "exactly one of contains and prefix"},
		{`{"turns":[{"contains":"a","prefix":"b","outputs":[{"text":"x"}]}]}`, "exactly one of contains and prefix"},
		{`{"turns":[{"contains":"a","outputs":[]}]}`, "no outputs"},
		{`{"turns":[{"contains":"a","outputs":[{}]}]}`, "neither text nor tool calls"},
		{`{"turns":[{"contains":"a","outputs":[{"tool_calls":[{"arguments":{}}]}]}]}`, "without a name"},
		{`{"turns":[{"contains":"a","outputs":[{"text":"x"}],"errors":[{"output":1,"status":429}]}]}`, "which the row does not have"},
		{`{"turns":[{"contains":"a","outputs":[{"text":"x"}],"errors":[{"output":0,"status":200}]}]}`, "not an HTTP error"},
		{`{"turns":[{"contains":"a","output":[{"text":"x"}]}]}`, "unknown field"},
	} {
		_, err := ParseScript([]byte(c.script))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error with %q", c.script, err, c.want)
		}
	}
}

func TestScript_MatchFirstRow(t *testing.T) {
	sc, err := ParseScript([]byte(testScript))
	if err != nil {
		t.Fatal(err)
	}
	for user, want := range map[string]int{
		"the weather, please": 0,
		"hello weather":       0, // the first matching row wins
		"hello":               1,
		"say hello":           -1, // prefix rows match the start only
		"a flaky one":         2,
	} {
		if got := sc.match(user); got != want {
			t.Errorf("%q matched turn %d, want %d", user, got, want)
		}
	}
}
