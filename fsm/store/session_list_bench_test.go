package store

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// listBenchSessions is the state of the list benchmark: 100,000 sessions
// of 10 agents, in the five statuses at rest or in a turn, each with a team
// (20), an env (3) and a run label of its own, created a second apart and
// updated in another order.
const listBenchSessions = 100_000

var listBenchDB = sync.OnceValue(func() *DB {
	db := New(Routing{})
	tx := db.Txn(true)
	statuses := []fsmpb.SessionStatus{
		fsmpb.SessionStatus_SESSION_STATUS_IDLE, fsmpb.SessionStatus_SESSION_STATUS_RUNNING, fsmpb.SessionStatus_SESSION_STATUS_WAITING,
		fsmpb.SessionStatus_SESSION_STATUS_ERRORED, fsmpb.SessionStatus_SESSION_STATUS_PAUSED,
	}
	const t0 = 1_780_000_000_000
	for i := range listBenchSessions {
		s := &fsmpb.Session{
			Id:          fmt.Sprintf("sess-%07d", (i*7919)%listBenchSessions),
			Status:      statuses[i%len(statuses)],
			Agent:       fmt.Sprintf("agent-%d", i%10),
			CreatedAtMs: t0 + int64(i)*1000,
			UpdatedAtMs: t0 + int64((i*104729)%listBenchSessions)*1000,
			Labels: []*fsmpb.Label{
				{Key: "env", Value: []string{"prod", "staging", "dev"}[i%3]},
				{Key: "run", Value: fmt.Sprint(i)},
				{Key: "team", Value: fmt.Sprintf("team-%02d", i%20)},
			},
		}
		if i%100 != 0 {
			s.ParentId = fmt.Sprintf("sess-%07d", ((i-i%100)*7919)%listBenchSessions)
		}
		tx.Put(TableSessions, s)
	}
	tx.Commit()
	return db
})

func lbls(kv ...string) []*fsmpb.Label {
	var out []*fsmpb.Label
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, &fsmpb.Label{Key: kv[i], Value: kv[i+1]})
	}
	return out
}

// BenchmarkListSessions100k reads pages of 50 of the 100,000 sessions
// through the list indexes, each query from its first page on, and
// reports the p99 of one page besides the mean.
func BenchmarkListSessions100k(b *testing.B) {
	db := listBenchDB()
	const t0 = 1_780_000_000_000
	for _, c := range []struct {
		name  string
		f     SessionFilter
		order ListOrder
		desc  bool
	}{
		{"none/created-desc", SessionFilter{}, ListByCreated, true},
		{"status", SessionFilter{Status: fsmpb.SessionStatus_SESSION_STATUS_ERRORED}, ListByCreated, true},
		{"agent", SessionFilter{Agent: "agent-3"}, ListByUpdated, true},
		{"label", SessionFilter{Labels: lbls("team", "team-07")}, ListByCreated, false},
		{"label+status+agent", SessionFilter{Labels: lbls("team", "team-07"), Status: fsmpb.SessionStatus_SESSION_STATUS_RUNNING, Agent: "agent-7"}, ListByCreated, true},
		{"parent", SessionFilter{ParentID: "sess-0000000"}, ListByCreated, false},
		{"label+last-hour", SessionFilter{Labels: lbls("env", "prod"), CreatedFrom: t0 + (listBenchSessions-3600)*1000}, ListByCreated, true},
		// The worst case: the driving label matches every tenth session
		// and the others reject most, so pages stop at MaxListScan.
		{"label+rare-status", SessionFilter{Labels: lbls("env", "dev"), Status: fsmpb.SessionStatus_SESSION_STATUS_PAUSED, Agent: "agent-1"}, ListByUpdated, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			durs := make([]time.Duration, 0, b.N)
			var after *ListPosition
			got := 0
			for b.Loop() {
				start := time.Now()
				page, next := db.Txn(false).ListSessions(c.f, c.order, c.desc, after, 50)
				durs = append(durs, time.Since(start))
				got += len(page)
				after = next // page on, from the first page again at the end
			}
			slices.Sort(durs)
			b.ReportMetric(float64(durs[len(durs)*99/100].Nanoseconds()), "p99-ns/page")
			b.ReportMetric(float64(got)/float64(len(durs)), "sessions/page")
		})
	}
}
