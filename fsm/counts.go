package fsm

import (
	"strings"

	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/fsm/store"
)

// Counts are the sizes of the state's tables, for an operator's look at a
// backup.
type Counts struct {
	// Sessions by status ("idle", "running", "waiting", "errored",
	// "paused", "closed", "deleted"), and "importing" for those whose
	// import has not ended.
	Sessions map[string]int `json:"sessions"`
	// Steps by status ("queued", "running", "waiting", "done").
	Steps         map[string]int `json:"steps"`
	History       int            `json:"history_entries"`
	Inbox         int            `json:"inbox_messages"`
	AcceptedIDs   int            `json:"accepted_message_ids"`
	Events        int            `json:"events"`
	Workers       int            `json:"workers"`
	Tools         int            `json:"tools"`
	Nodes         int            `json:"nodes"`
	TimersPending int            `json:"timers_pending"`
}

// Counts counts every table.
func (s *State) Counts() Counts {
	c := Counts{Sessions: map[string]int{}, Steps: map[string]int{}}
	for _, sess := range store.All[*fsmpb.Session](s.tx, store.TableSessions, store.IndexID) {
		if importing(sess) {
			c.Sessions["importing"]++
			continue
		}
		c.Sessions[enumWord(sess.Status.String(), "SESSION_STATUS_")]++
	}
	for _, st := range store.All[*fsmpb.Step](s.tx, store.TableSteps, store.IndexID) {
		c.Steps[enumWord(st.Status.String(), "STEP_STATUS_")]++
	}
	c.History = count(s, store.TableHistory)
	c.Inbox = count(s, store.TableInbox)
	c.AcceptedIDs = count(s, store.TableAccepted)
	for _, p := range store.All[*store.EventPage](s.tx, store.TableEvents, store.IndexID) {
		c.Events += p.Len()
	}
	c.Workers = count(s, store.TableWorkers)
	c.Tools = count(s, store.TableTools)
	c.Nodes = count(s, store.TableNodes)
	c.TimersPending = len(s.WaitingTimers())
	return c
}

func count(s *State, table string) int { return s.tx.Count(table) }

func enumWord(name, prefix string) string {
	return strings.ToLower(strings.TrimPrefix(name, prefix))
}
