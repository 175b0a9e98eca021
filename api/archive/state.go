package archive

import (
	"errors"
	"fmt"
	"math"

	"github.com/dexhq/dex/api/archive/format"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// ErrNotFound says a session is not there: not in the cluster's state
// (FromState, FromAPI) or not in the archive (Store.Get). The errors that
// match it say which session and where.
var ErrNotFound = errors.New("session not found")

// notFound is an error that matches ErrNotFound with its own message.
type notFound string

func (e notFound) Error() string        { return string(e) }
func (e notFound) Is(target error) bool { return target == ErrNotFound }

// Pages of a read from the state: the history and the Steps are converted
// and compressed a page at a time, so the uncompressed session is never
// held whole.
const (
	pageCount = 500
	pageBytes = 1 << 20
)

// FromState returns the archived form of session id as st holds it, with
// the conversions GetSession uses. st is one consistent view (the leader's
// read-only state), so the object is the session at one applied index.
func FromState(st *fsm.State, id string) ([]byte, error) {
	sess := st.Session(id)
	if sess == nil {
		return nil, notFound(fmt.Sprintf("session %q not found", id))
	}
	header := sess.API()
	header.Inbox = fsmpb.InboxAPI(st.Inbox(id, math.MaxInt))
	e := format.NewEncoder()
	e.Header(header, st.EventLog(id).GetLastSeq())
	for after := uint64(0); ; {
		page, next := st.History(id, after, pageCount, pageBytes)
		for _, h := range fsmpb.HistoryAPI(page) {
			e.History(h)
		}
		if next == 0 {
			break
		}
		after = next
	}
	for after := uint64(0); ; {
		page, next := st.StepsPage(id, after, pageCount, pageBytes)
		for _, s := range page {
			e.Step(s.API())
		}
		if next == 0 {
			break
		}
		after = next
	}
	for after := uint64(0); ; {
		page, next := st.FoldedTurns(id, after, pageCount)
		for _, f := range fsmpb.FoldedTurnsAPI(page) {
			e.Folded(f)
		}
		if next == 0 {
			break
		}
		after = next
	}
	for _, ev := range st.Events(id, 0) {
		e.Event(ev.API())
	}
	return e.Finish()
}
