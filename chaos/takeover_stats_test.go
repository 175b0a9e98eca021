package chaos

import (
	"context"
	"github.com/dexhq/dex/chaos/harness"
	"strings"
	"testing"
	"time"
)

func TestSpreadOf(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var out []time.Duration
		for _, x := range v {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	for _, c := range []struct {
		name             string
		in               []time.Duration
		median, p99, max int
	}{
		{"empty", nil, 0, 0, 0},
		{"one", ms(700), 700, 700, 700},
		{"odd, unsorted", ms(900, 100, 500), 500, 900, 900},
		{"even: the mean of the middle two", ms(400, 100, 300, 200), 250, 400, 400},
	} {
		s := SpreadOf(c.in)
		if s.Median.Milliseconds() != int64(c.median) || s.P99.Milliseconds() != int64(c.p99) || s.Max.Milliseconds() != int64(c.max) {
			t.Errorf("%s: got %s; want median %d, p99 %d, max %d", c.name, s, c.median, c.p99, c.max)
		}
	}
	// With 200 samples p99 is the 198th, not the max.
	var many []time.Duration
	for i := 1; i <= 200; i++ {
		many = append(many, time.Duration(i)*time.Millisecond)
	}
	if s := SpreadOf(many); s.P99 != 198*time.Millisecond || s.Max != 200*time.Millisecond {
		t.Errorf("200 samples: %s", s)
	}
}

func model(session, step string) harness.LedgerEntry {
	return harness.LedgerEntry{Session: session, Step: step, Kind: "model"}
}

func TestRepeatedModelCalls(t *testing.T) {
	tool := harness.LedgerEntry{Session: "a", Step: "t1", Kind: "tool"}
	entries := []harness.LedgerEntry{model("a", "m1"), tool, model("a", "m2"), model("b", "m1"), model("b", "m2")}
	total, rep, base, err := repeatedModelCalls(entries, []string{"a", "b"})
	if err != nil || total != 4 || rep != 0 || base != 2 {
		t.Fatalf("clean run: total %d, repeated %d, baseline %d, %v", total, rep, base, err)
	}

	// A Step whose model call ran twice is a repeat, and the session made
	// more calls than an uninterrupted one.
	entries = append(entries, model("b", "m2"))
	total, rep, _, err = repeatedModelCalls(entries, []string{"a", "b"})
	if total != 5 || rep != 1 {
		t.Fatalf("a rerun: total %d, repeated %d", total, rep)
	}
	if err == nil || !strings.Contains(err.Error(), "b made 3") {
		t.Fatalf("a session with more calls than an uninterrupted one: %v", err)
	}

	// A session that made fewer calls (it did not finish its turn) is
	// reported too.
	if _, _, _, err := repeatedModelCalls([]harness.LedgerEntry{model("a", "m1"), model("a", "m2"), model("b", "m1")}, []string{"a", "b"}); err == nil || !strings.Contains(err.Error(), "b made 1") {
		t.Fatalf("a short session: %v", err)
	}
	// No model call at all in the uninterrupted session: the ledger is not
	// the Worker's.
	if _, _, _, err := repeatedModelCalls([]harness.LedgerEntry{tool}, []string{"a"}); err == nil || !strings.Contains(err.Error(), "no model call") {
		t.Fatalf("an empty baseline: %v", err)
	}
}

// Bad options are refused before any binary is looked for: the bin dir is
// empty.
func TestRunTakeover_BadOptions(t *testing.T) {
	bin := t.TempDir()
	for _, o := range []TakeoverOptions{
		{BinDir: bin, Target: TargetDex, Kills: 0},
		{BinDir: bin, Target: "nginx", Kills: 1},
	} {
		if _, err := RunTakeover(context.Background(), o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}

func TestTakeoverSummary(t *testing.T) {
	r := &TakeoverResult{Target: TargetDex, Kills: []Kill{{Ready: time.Second, Idle: 2 * time.Second}}}
	if got := strings.Join(r.Summary(), "\n"); strings.Contains(got, "model calls") || !strings.Contains(got, "median 2000 ms") {
		t.Fatalf("a run stopped before the ledger was read:\n%s", got)
	}
	r.Sessions, r.ModelCalls, r.BaselineModelCalls = 2, 4, 2
	if got := strings.Join(r.Summary(), "\n"); !strings.Contains(got, "repeated model calls: 0 (4 model calls in 2 sessions") {
		t.Fatalf("a complete run:\n%s", got)
	}
}
