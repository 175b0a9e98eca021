package dispatch

import (
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// DefaultPreferOtherWait is how long a ready Step is kept from a Worker it
// should avoid (an attempt of the Step's session expired unclaimed there
// since the Worker's last claim, or the Worker is unhealthy) so that another
// Worker can take it. It is longer than a poll's round trip, so a healthy
// Worker woken by the requeue takes the Step first, and short, because with
// a single Worker the retry still runs on it: this much later.
const DefaultPreferOtherWait = time.Second

// readySince is when the broker first saw a Step ready for its next attempt
// (attempts: how many it had then). It survives the Step being re-queued in
// the broker when another write touches it.
type readySince struct {
	attempts int
	at       int64
}

// markReady records when a Step became ready for its next attempt.
func (b *Broker) markReady(s *fsmpb.Step, now int64) {
	if r, ok := b.since[s.Id]; ok && r.attempts == len(s.Attempts) {
		return
	}
	b.since[s.Id] = readySince{attempts: len(s.Attempts), at: now}
}

// avoids reports whether a Worker should leave a Step to another one: the
// Step's last attempt expired unclaimed on it, an attempt of the Step's
// session did since the Worker's last claim, or it is unhealthy.
func (b *Broker) avoids(worker string, s *fsmpb.Step) bool {
	if worker == "" {
		return false
	}
	return lastExpiredUnclaimedBy(s) == worker || b.health.avoids(worker, s.SessionId)
}

// passOn decides whether a poll of worker leaves the ready Step s (of queue
// q) to another Worker. It does when another Worker that need not avoid s
// waits on q (that poll is woken to take it), or while s has been ready for
// less than preferOther. recheck is when the poll should look again (unix
// ms; 0 when it takes s).
func (b *Broker) passOn(worker string, s *fsmpb.Step, q *readyQueue, now int64) (pass bool, recheck int64) {
	if !b.avoids(worker, s) {
		return false, 0
	}
	until := now
	if r, ok := b.since[s.Id]; ok {
		until = r.at + b.preferOther.Milliseconds()
	}
	for _, ws := range []map[*waiter]struct{}{q.waiters, b.wildOf(q.key)} {
		for w := range ws {
			if w.worker != "" && w.worker != worker && !b.avoids(w.worker, s) {
				b.wakeLocked(w)
				// Look again later in case the woken poll takes something else.
				return true, max(until, now+b.preferOther.Milliseconds())
			}
		}
	}
	if now < until {
		return true, until
	}
	return false, 0
}

// wildOf: the polls waiting for a tool queue's Steps of every agent.
func (b *Broker) wildOf(k queueKey) map[*waiter]struct{} {
	if k.model {
		return nil
	}
	return b.wild[k.tool]
}

// WorkerHealth is the broker's Worker health, by Worker id, dropping Workers
// the state no longer has.
func (b *Broker) WorkerHealth() []*dexv1.WorkerHealth {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.src.State()
	b.health.forget(func(id string) bool { return st.Worker(id) != nil })
	return b.health.report()
}
