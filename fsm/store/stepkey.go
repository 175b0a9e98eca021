package store

import (
	"fmt"

	"github.com/dexhq/dex/api/wirerules"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// StepID is the id of a session's Step number n: "SESSION-sN". The rule
// lives in wirerules, where the libraries read a Step's session from it.
func StepID(sessionID string, n uint64) string { return wirerules.StepID(sessionID, n) }

// ParseStepID splits a Step id into its session and number; ok is false for
// anything StepID does not write.
func ParseStepID(id string) (sessionID string, n uint64, ok bool) { return wirerules.ParseStepID(id) }

// stepKeyIndexer keys a Step by its session, a NUL and its number big endian
// (sessionSeqBytes),
// from the Step or from its id: the one index finds a Step by id and lists a
// session's Steps in order (so a Step write touches no second index for it).
type stepKeyIndexer struct{}

// noStep is a key no Step has (a session id never holds 0xff): what an id
// that is not a Step id looks up.
var noStep = []byte{0xff}

func (stepKeyIndexer) FromObject(obj any) (bool, []byte, error) {
	st, ok := obj.(*fsmpb.Step)
	if !ok {
		return false, nil, fmt.Errorf("step index: %T is not a Step", obj)
	}
	if st.Id != StepID(st.SessionId, st.Number) {
		return false, nil, fmt.Errorf("step %q is not Step %d of session %q", st.Id, st.Number, st.SessionId)
	}
	return true, sessionSeqBytes(st.SessionId, st.Number), nil
}

// FromArgs takes a Step id, or (session id, number).
func (stepKeyIndexer) FromArgs(args ...any) ([]byte, error) {
	switch len(args) {
	case 1:
		id, ok := args[0].(string)
		if !ok {
			return nil, fmt.Errorf("step index: the id must be a string, got %T", args[0])
		}
		session, n, ok := ParseStepID(id)
		if !ok {
			return noStep, nil
		}
		return sessionSeqBytes(session, n), nil
	case 2:
		session, ok1 := args[0].(string)
		n, ok2 := args[1].(uint64)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("step index takes (string, uint64), got (%T, %T)", args[0], args[1])
		}
		return sessionSeqBytes(session, n), nil
	}
	return nil, fmt.Errorf("step index takes an id or (session, number), got %d arguments", len(args))
}
