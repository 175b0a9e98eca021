package lease

import "time"

// Contacts returns each Worker's last poll or heartbeat and its long polls
// open now, as this leader saw them (empty off the leader).
func (w *Workers) Contacts() (seen map[string]time.Time, open map[string]int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	seen, open = map[string]time.Time{}, map[string]int{}
	if w.fence.Current() == nil {
		return seen, open
	}
	for id, t := range w.seen {
		seen[id] = t
	}
	for id, n := range w.open {
		open[id] = n
	}
	return seen, open
}
