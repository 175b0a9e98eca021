package gc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/lease/leasetest"
)

// fakeArchive is an archive that holds what it was given: per session, the
// status and history length the state showed at the write. fail, when it
// returns an error for a session, makes that write fail.
type fakeArchive struct {
	mu     sync.Mutex
	held   map[string]string
	tries  []string
	fail   func(id string) error
	during func(id string) // called inside a successful write
}

func (a *fakeArchive) Archive(_ context.Context, st *fsm.State, id string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.tries = append(a.tries, id)
	if a.fail != nil {
		if err := a.fail(id); err != nil {
			return err
		}
	}
	s := st.Session(id)
	if s == nil || st.IsDeleted(id) {
		return fmt.Errorf("session %s is not in the state it was archived from", id)
	}
	if a.held == nil {
		a.held = map[string]string{}
	}
	a.held[id] = fmt.Sprintf("%s/%d", s.Status, len(st.Steps(id)))
	if a.during != nil {
		a.during(id)
	}
	return nil
}

func (a *fakeArchive) holds(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.held[id]
	return ok
}

func (a *fakeArchive) attempts() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.tries)
}

var errUnwritable = errors.New("write sessions/x.dexsession to the archive file:///a: the archive is not writable")

func sessionIDs(c *leasetest.Cluster) []string {
	var out []string
	for _, s := range c.State().Sessions() {
		out = append(out, s.Id)
	}
	return out
}

// expiredIDs lists the sessions every ExpireClosedSessions and
// ExpireSessions proposed named.
func expiredIDs(c *leasetest.Cluster) []string {
	var out []string
	for _, p := range c.Proposals("ExpireClosedSessions") {
		out = append(out, p.GetExpireClosedSessions().SessionIds...)
	}
	for _, p := range c.Proposals("ExpireSessions") {
		out = append(out, p.GetExpireSessions().SessionIds...)
	}
	return out
}

func archiveLines(logs *observer.ObservedLogs) []observer.LoggedEntry {
	return logs.FilterMessageSnippet("archive").AllUntimed()
}

func TestArchive_AFailingArchiveStopsTheDeletesUntilItTakesWritesAgain(t *testing.T) {
	c := leasetest.New(t)
	clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	c.Now = clk.Now
	epoch := c.BumpEpoch()
	closedSessions(c, "s", 5, time.Minute)
	c.CreateSession("open", "")
	clk.now = clk.now.Add(2 * time.Minute)
	core, logs := observer.New(zapcore.InfoLevel)
	arch := &fakeArchive{fail: func(string) error { return errUnwritable }}
	g := NewSessions(c, c, SessionConfig{Archive: arch, Now: clk.Now}, zap.New(core))

	for round := range 3 {
		if err := g.collect(context.Background(), epoch); err != nil {
			t.Fatalf("round %d: %v; a failing archive is not the collector's error", round, err)
		}
		clk.now = clk.now.Add(time.Second)
	}
	if got := expiredIDs(c); len(got) != 0 {
		t.Fatalf("deletes proposed for sessions the archive did not take: %v", got)
	}
	if got := sessionIDs(c); len(got) != 6 {
		t.Fatalf("sessions left: %v; want all 6", got)
	}
	// A write fails three times in a row: the rest of the batch waits.
	if n := arch.attempts(); n != 3*archiveFailStreak {
		t.Fatalf("%d writes tried in 3 rounds of 5 due sessions; want %d", n, 3*archiveFailStreak)
	}
	lines := archiveLines(logs)
	if len(lines) != 1 || lines[0].Level != zapcore.ErrorLevel || !strings.Contains(lines[0].ContextMap()["error"].(string), "not writable") {
		t.Fatalf("log lines about the archive in 3 failing rounds: %v; want one error naming the cause", lines)
	}

	// Ten minutes on, still failing: one more line, counting the rounds.
	clk.now = clk.now.Add(archiveLogEvery)
	if err := g.collect(context.Background(), epoch); err != nil {
		t.Fatal(err)
	}
	lines = archiveLines(logs)
	if len(lines) != 2 || !strings.Contains(lines[1].Message, "still fail") || lines[1].ContextMap()["failed_rounds"] != int64(3) {
		t.Fatalf("log lines after ten more minutes of failures: %v; want a second one counting 3 rounds", lines)
	}

	// The archive takes writes again: every due session is archived, then
	// deleted, and the log says so once.
	arch.mu.Lock()
	arch.fail = nil
	arch.mu.Unlock()
	if err := g.collect(context.Background(), epoch); err != nil {
		t.Fatal(err)
	}
	if got := sessionIDs(c); fmt.Sprint(got) != "[open]" {
		t.Fatalf("sessions left once the archive takes writes: %v", got)
	}
	for i := range 5 {
		if id := fmt.Sprintf("s%03d", i); !arch.holds(id) {
			t.Fatalf("session %s was deleted and the archive does not hold it", id)
		}
	}
	if arch.holds("open") {
		t.Fatal("a session no retention deletes was archived")
	}
	lines = archiveLines(logs)
	if len(lines) != 3 || lines[2].Level != zapcore.InfoLevel || !strings.Contains(lines[2].Message, "takes writes again") {
		t.Fatalf("log lines after the archive recovered: %v", lines)
	}
	if err := g.collect(context.Background(), epoch); err != nil {
		t.Fatal(err)
	}
	if n := len(archiveLines(logs)); n != 3 {
		t.Fatalf("%d log lines about the archive after a quiet round; want still 3", n)
	}
}

func TestArchive_OnlyTheSessionsWrittenAreDeletedAndTheRestIsRetried(t *testing.T) {
	c := leasetest.New(t)
	clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	c.Now = clk.Now
	epoch := c.BumpEpoch()
	closedSessions(c, "s", 6, time.Minute)
	clk.now = clk.now.Add(2 * time.Minute)
	var mu sync.Mutex
	bad := map[string]bool{"s001": true, "s004": true}
	arch := &fakeArchive{fail: func(id string) error {
		mu.Lock()
		defer mu.Unlock()
		if bad[id] {
			return fmt.Errorf("write %s: %w", id, errUnwritable)
		}
		return nil
	}}
	g := NewSessions(c, c, SessionConfig{Archive: arch, Now: clk.Now}, nil)

	if err := g.collect(context.Background(), epoch); err != nil {
		t.Fatal(err)
	}
	if got := expiredIDs(c); fmt.Sprint(got) != "[s000 s002 s003 s005]" {
		t.Fatalf("deletes proposed for %v; want the four archived sessions", got)
	}
	if got := sessionIDs(c); fmt.Sprint(got) != "[s001 s004]" {
		t.Fatalf("sessions left: %v; want the two the archive refused", got)
	}

	// The next tick tries them again; one is written and deleted.
	mu.Lock()
	delete(bad, "s001")
	mu.Unlock()
	if err := g.collect(context.Background(), epoch); err != nil {
		t.Fatal(err)
	}
	if got := sessionIDs(c); fmt.Sprint(got) != "[s004]" {
		t.Fatalf("sessions left: %v; want s004 alone", got)
	}
	mu.Lock()
	delete(bad, "s004")
	mu.Unlock()
	if err := g.collect(context.Background(), epoch); err != nil {
		t.Fatal(err)
	}
	if got := sessionIDs(c); len(got) != 0 {
		t.Fatalf("sessions left: %v", got)
	}
	got := expiredIDs(c)
	slices.Sort(got)
	if fmt.Sprint(got) != "[s000 s001 s002 s003 s004 s005]" {
		t.Fatalf("deletes proposed for %v; want each session once", got)
	}
	for _, id := range got {
		if !arch.holds(id) {
			t.Fatalf("session %s deleted unarchived", id)
		}
	}
}

func TestArchive_IdleSessionsAreArchivedBeforeTheyAreDeleted(t *testing.T) {
	c := leasetest.New(t)
	clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	c.Now = clk.Now
	epoch := c.BumpEpoch()
	c.RegisterWorker("w", true)
	finished(c, "old", 2)
	finished(c, "moves", 1)
	finished(c, "broken", 1)
	clk.now = clk.now.Add(2 * time.Hour)
	arch := &fakeArchive{
		fail: func(id string) error {
			if id == "broken" {
				return errUnwritable
			}
			return nil
		},
		// A message comes while "moves" is written: it is no longer idle
		// and the delete leaves it alone.
		during: func(id string) {
			if id == "moves" {
				c.Send("moves", "late", "one more thing")
			}
		},
	}
	g := NewSessions(c, c, SessionConfig{Retention: time.Hour, Archive: arch, Now: clk.Now}, nil)
	if err := g.collect(context.Background(), epoch); err != nil {
		t.Fatal(err)
	}
	if got := expiredIDs(c); fmt.Sprint(got) != "[moves old]" && fmt.Sprint(got) != "[old moves]" {
		t.Fatalf("deletes proposed for %v; want the two archived idle sessions", got)
	}
	if got := sessionIDs(c); fmt.Sprint(got) != "[broken moves]" {
		t.Fatalf("sessions left: %v; want the one not archived and the one that moved on", got)
	}
	if !arch.holds("old") || arch.held["old"] != "SESSION_STATUS_IDLE/2" {
		t.Fatalf("the archive holds %v for the deleted session", arch.held["old"])
	}
}

// Without an archive the retentions delete as before: nothing written.
func TestArchive_NoArchiveDeletesWithoutWriting(t *testing.T) {
	c := leasetest.New(t)
	clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	c.Now = clk.Now
	epoch := c.BumpEpoch()
	closedSessions(c, "s", 3, time.Minute)
	clk.now = clk.now.Add(2 * time.Minute)
	core, logs := observer.New(zapcore.InfoLevel)
	g := NewSessions(c, c, SessionConfig{Now: clk.Now}, zap.New(core))
	if err := g.collect(context.Background(), epoch); err != nil {
		t.Fatal(err)
	}
	if got := sessionIDs(c); len(got) != 0 {
		t.Fatalf("sessions left: %v", got)
	}
	if lines := archiveLines(logs); len(lines) != 0 {
		t.Fatalf("log lines about an archive that is not set: %v", lines)
	}
}
