package chaos

import (
	"strings"
	"testing"
)

func TestScenario_CountsSayWhatTheyAllow(t *testing.T) {
	for _, c := range []struct {
		c           *count
		n, attempts int
		ok          bool
		name        string
	}{
		{exactly(2), 2, 2, true, "exactly 2"},
		{exactly(2), 1, 2, false, "exactly 2"},
		{atMost(1), 0, 1, true, "at most 1"},
		{atMost(1), 2, 3, false, "at most 1"},
		{atLeast(2), 5, 0, true, "at least 2"},
		{atLeast(2), 1, 3, false, "at least 2"},
		{between(1, 3), 4, 4, false, "1..3"},
		{perAttempt, 2, 2, true, "at least 1, at most once per attempt"},
		{perAttempt, 3, 2, false, "at least 1, at most once per attempt"},
		{perAttempt, 0, 2, false, "at least 1, at most once per attempt"},
		// The attempt survived the fault: it ran once.
		{survivor, 1, 1, true, "at least 1, at most once per attempt, once if one attempt"},
		{survivor, 2, 1, false, "at least 1, at most once per attempt, once if one attempt"},
		{survivor, 1, 3, true, "at least 1, at most once per attempt, once if one attempt"},
	} {
		if got := c.c.ok(c.n, c.attempts); got != c.ok {
			t.Errorf("%s: %d in %d attempts: ok %v; want %v", c.c, c.n, c.attempts, got, c.ok)
		}
		if c.c.String() != c.name {
			t.Errorf("%q; want %q", c.c.String(), c.name)
		}
	}
}

func TestScenario_ABadRowIsRefusedWithWhy(t *testing.T) {
	for _, c := range []struct {
		s    scenario
		want string
	}{
		{scenario{}, "no message"},
		{scenario{message: "model"}, "no moment"},
		{scenario{message: "no such turn", at: []moment{idleSession("idle")}}, `"no such turn" picks no turn`},
		{scenario{message: "model", at: []moment{{what: "nothing"}}}, "no way to reach it"},
		{scenario{message: "model", at: []moment{idleSession("idle")}, steps: []stepExpect{{}}}, "names no Step"},
		{scenario{message: "model", at: []moment{idleSession("idle")}, steps: []stepExpect{{step: caught(1)}}}, "has 1 moments"},
		// A compacting session's second message is the long one.
		{scenario{message: "model", compacting: true, at: []moment{idleSession("idle")}}, `"model: a long message`},
	} {
		err := c.s.validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v; want an error saying %q", c.s, err, c.want)
		}
	}
	ok := scenario{message: "tools", compacting: true, at: []moment{idleSession("idle")}, steps: []stepExpect{{step: caught(0)}}}
	if err := ok.validate(); err != nil {
		t.Fatal(err)
	}
}
