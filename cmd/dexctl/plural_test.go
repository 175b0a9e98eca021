package main

import (
	"bytes"
	"strings"
	"testing"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

func TestOneOfAThingIsSingular(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{plural(1, "turn", "turns"), "1 turn"},
		{plural(0, "turn", "turns"), "0 turns"},
		{plural(uint64(2), "history entry", "history entries"), "2 history entries"},
		{plural(uint32(1), "Step", "Steps"), "1 Step"},
	} {
		if c.got != c.want {
			t.Errorf("%q, want %q", c.got, c.want)
		}
	}
	var b bytes.Buffer
	if err := printSettled(&b, &dexv1.Session{Id: "s1", Status: dexv1.SessionStatus_SESSION_STATUS_IDLE, TurnsCompleted: 1}, false); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(b.String()); got != "session s1 is idle: 1 turn completed, 0 failed" {
		t.Errorf("summary %q", got)
	}
}
