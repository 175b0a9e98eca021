package fsm

import (
	"github.com/dexhq/dex/fsm/store"
)

// StepID is the id of a session's Step number n: "SESSION-sN". The store
// keys Steps by it (store.StepID).
func StepID(sessionID string, n uint64) string { return store.StepID(sessionID, n) }
