package chaos

import (
	"fmt"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/chaos/harness"
)

// cellLedger reads the side-effect ledger the cell's Workers write: what
// ran, how often, with which key.
type cellLedger struct {
	*cellLog
	ledger string
}

func (e *cellLedger) ledgerLines() ([]harness.LedgerEntry, error) {
	return harness.ReadLedger(e.ledger)
}

func (e *cellLedger) execs(session string, f func(harness.LedgerEntry) bool) (int, error) {
	l, err := e.ledgerLines()
	if err != nil {
		return 0, err
	}
	return harness.Executions(l, session, f), nil
}

// waitLedger waits until the ledger has a line matching f.
func (e *cellLedger) waitLedger(what string, f func(harness.LedgerEntry) bool) (harness.LedgerEntry, error) {
	deadline := time.Now().Add(waitShort)
	for {
		l, err := e.ledgerLines()
		if err != nil {
			return harness.LedgerEntry{}, err
		}
		for _, x := range l {
			if f(x) {
				e.notef("ledger: %s %s attempt %d (%s)", x.Tool, x.CallID, x.Attempt, x.Worker)
				return x, nil
			}
		}
		if time.Now().After(deadline) {
			return harness.LedgerEntry{}, fmt.Errorf("the ledger has no %s within %s", what, waitShort)
		}
		if err := e.sleep(20 * time.Millisecond); err != nil {
			return harness.LedgerEntry{}, err
		}
	}
}

func toolLine(session, tool string) func(harness.LedgerEntry) bool {
	return func(x harness.LedgerEntry) bool { return x.Session == session && x.Tool == tool }
}

// callExecs counts the executions of one call (a tool Step's call id).
func (e *cellLedger) callExecs(session string, st *dexv1.Step) (int, error) {
	return e.execs(session, func(x harness.LedgerEntry) bool { return x.CallID == st.CallId && x.Kind == "tool" })
}

// stepExecs counts the executions of one Step (a model, compaction or poll).
func (e *cellLedger) stepExecs(session string, st *dexv1.Step, kind string) (int, error) {
	return e.execs(session, func(x harness.LedgerEntry) bool { return x.Step == st.Id && x.Kind == kind })
}

// sameKey checks every execution of a write carried the Step's key.
func (e *cellLedger) sameKey(session string, st *dexv1.Step) error {
	if st.IdempotencyKey == "" {
		return fmt.Errorf("the write %s has no idempotency key", st.CallId)
	}
	l, err := e.ledgerLines()
	if err != nil {
		return err
	}
	for _, x := range l {
		if x.Session == session && x.CallID == st.CallId && x.Kind == "tool" && x.IdempotencyKey != st.IdempotencyKey {
			return fmt.Errorf("attempt %d of %s ran with key %q; the Step's key is %q", x.Attempt, st.CallId, x.IdempotencyKey, st.IdempotencyKey)
		}
	}
	return nil
}
