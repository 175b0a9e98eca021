package store

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/fsm/store/internal/cowdb"
)

// The list indexes serve ListSessions' filters and orders without a scan
// of the sessions table. Each visible session (not deleted, not being
// imported) has, in each of the two indexes, one key per predicate it
// matches:
//
//	predicate NUL time(8 bytes, sign flipped, big endian) id NUL
//
// where the predicate is "*" (every session), "s" and the status byte,
// "a" and the agent, "p" and the parent id, "f" and the source of a fork,
// or "l" and key=value for each label, and time is created_at_ms: the sessions matching one predicate
// are one range of IndexListCreated, in created order. IndexListUpdated
// has the "*" key alone, with updated_at_ms: a session's updated time
// changes with every write, so each of its keys there would be moved on
// every write; a filtered list in updated order walks every session in
// that order and checks each (MaxListScan bounds a page). A session has at
// most 5+MaxLabels keys (the rules bound its labels); the keys go with
// the row when it is hidden or purged, as every index's do.

// ListOrder is the order ListSessions reads in.
type ListOrder int

const (
	ListByCreated ListOrder = iota
	ListByUpdated
)

func (o ListOrder) index() string {
	if o == ListByUpdated {
		return IndexListUpdated
	}
	return IndexListCreated
}

// SessionFilter is what ListSessions keeps: every field given must hold.
// Times are Unix ms; a From is inclusive, a To exclusive, 0 no bound.
type SessionFilter struct {
	Status                 fsmpb.SessionStatus // 0: any
	Agent                  string
	ParentID               string
	ForkedFrom             string
	Labels                 []*fsmpb.Label
	CreatedFrom, CreatedTo int64
	UpdatedFrom, UpdatedTo int64
}

// ListPosition is a place in a list order: the session last read (its
// time in that order and its id). A page resumes strictly after it.
type ListPosition struct {
	At int64
	ID string
}

// MaxListScan bounds the index entries one page examines: a page stops
// there with a position to resume from even when it holds fewer sessions
// than asked (or none), so a filter the driving index serves badly costs
// a bounded amount per page, never a walk of the whole table.
const MaxListScan = 1000

type listIndexer struct{ updated bool }

func (x listIndexer) FromObject(obj any) (bool, [][]byte, error) {
	s, ok := obj.(*fsmpb.Session)
	if !ok {
		return false, nil, fmt.Errorf("session list index: %T is not a Session", obj)
	}
	if s.Status == fsmpb.SessionStatus_SESSION_STATUS_DELETED || s.Import != nil {
		return false, nil, nil
	}
	if x.updated {
		// Its keys change with every write of the session: one key, so a
		// write costs one entry moved, whatever the session's labels.
		return true, [][]byte{listKey(predAll, s.UpdatedAtMs, s.Id)}, nil
	}
	return true, listKeys(s, s.CreatedAtMs), nil
}

// listKeyID is the id key (the sessions table's) in a list key: the store
// names the list indexes' rows by key (cowdb.Options.ByKey), so that a
// write of a session that keeps its keys writes neither index.
func listKeyID(key []byte) []byte {
	i := bytes.IndexByte(key, 0)
	return key[i+1+8:]
}

// listKeys are a session's keys in one index: built into one buffer, as
// every write of a session builds them for its old and its new row.
func listKeys(s *fsmpb.Session, at int64) [][]byte {
	n, size := 2, 0
	if s.Agent != "" {
		n++
		size += len(s.Agent)
	}
	if s.ParentId != "" {
		n++
		size += len(s.ParentId)
	}
	if s.ForkedFrom != "" {
		n++
		size += len(s.ForkedFrom)
	}
	for _, l := range s.Labels {
		size += len(l.Key) + 1 + len(l.Value)
	}
	n += len(s.Labels)
	const fixed = 2 + 1 + 8 + 1 // the longest predicate tag, its NUL, the time, the id's NUL
	buf := make([]byte, 0, size+n*(fixed+len(s.Id)))
	keys := make([][]byte, 0, n)
	key := func(parts ...string) {
		start := len(buf)
		buf = appendListKey(buf, at, s.Id, parts...)
		keys = append(keys, buf[start:len(buf):len(buf)])
	}
	key(predAll)
	key(predStatus(s.Status))
	if s.Agent != "" {
		key("a", s.Agent)
	}
	if s.ParentId != "" {
		key("p", s.ParentId)
	}
	if s.ForkedFrom != "" {
		key("f", s.ForkedFrom)
	}
	for _, l := range s.Labels {
		key("l", l.Key, "=", l.Value)
	}
	return keys
}

// FromArgs takes one []byte: a key as listKey builds it (or a part of one).
func (listIndexer) FromArgs(args ...any) ([]byte, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("session list index takes one key, got %d arguments", len(args))
	}
	k, ok := args[0].([]byte)
	if !ok {
		return nil, fmt.Errorf("session list index takes a []byte, got %T", args[0])
	}
	return k, nil
}

const predAll = "*"

func predStatus(st fsmpb.SessionStatus) string { return string([]byte{'s', byte(st)}) }
func predAgent(a string) string                { return "a" + a }
func predParent(p string) string               { return "p" + p }
func predForkedFrom(src string) string         { return "f" + src }
func predLabel(k, v string) string             { return "l" + k + "=" + v }

func listPrefix(pred string) []byte {
	return append([]byte(pred), 0)
}

func listKey(pred string, at int64, id string) []byte {
	return appendListKey(make([]byte, 0, len(pred)+len(id)+10), at, id, pred)
}

// appendListKey appends the key of a session's predicate (its parts
// joined) at time at to buf.
func appendListKey(buf []byte, at int64, id string, pred ...string) []byte {
	for _, p := range pred {
		buf = append(buf, p...)
	}
	buf = append(buf, 0)
	buf = binary.BigEndian.AppendUint64(buf, uint64(at)^(1<<63))
	return append(append(buf, id...), 0)
}

// drivingPredicate is the predicate whose index range a list walks; the
// others are checked on each row. Without counts of each range, it takes
// the one likely narrowest: a parent's children, a source's forks, then a
// label, an agent, a status, and every session when nothing else is given. MaxListScan
// bounds a page however the guess turns out.
func drivingPredicate(f SessionFilter) string {
	switch {
	case f.ParentID != "":
		return predParent(f.ParentID)
	case f.ForkedFrom != "":
		return predForkedFrom(f.ForkedFrom)
	case len(f.Labels) > 0:
		return predLabel(f.Labels[0].Key, f.Labels[0].Value)
	case f.Agent != "":
		return predAgent(f.Agent)
	case f.Status != 0:
		return predStatus(f.Status)
	}
	return predAll
}

// Matches reports whether a session passes every predicate of f.
func (f SessionFilter) Matches(s *fsmpb.Session) bool {
	if f.Status != 0 && s.Status != f.Status {
		return false
	}
	if f.Agent != "" && s.Agent != f.Agent {
		return false
	}
	if f.ParentID != "" && s.ParentId != f.ParentID {
		return false
	}
	if f.ForkedFrom != "" && s.ForkedFrom != f.ForkedFrom {
		return false
	}
	if !inRange(s.CreatedAtMs, f.CreatedFrom, f.CreatedTo) || !inRange(s.UpdatedAtMs, f.UpdatedFrom, f.UpdatedTo) {
		return false
	}
	for _, want := range f.Labels {
		found := false
		for _, l := range s.Labels {
			if l.Key == want.Key {
				found = l.Value == want.Value
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func inRange(at, from, to int64) bool {
	return (from == 0 || at >= from) && (to == 0 || at < to)
}

// ListSessions returns up to limit visible sessions that pass f, in order
// (its time, then id; reversed when desc), strictly after the position
// after (nil: from the start), and the position to read on from (nil
// when the order's range is exhausted). It walks one range of a list
// index and examines at most MaxListScan entries: a page that reaches
// that bound returns the position of the last entry examined.
func (t *Txn) ListSessions(f SessionFilter, order ListOrder, desc bool, after *ListPosition, limit int) ([]*fsmpb.Session, *ListPosition) {
	limit = max(limit, 1)
	pred := drivingPredicate(f)
	from, to := f.CreatedFrom, f.CreatedTo
	if order == ListByUpdated {
		pred = predAll // the updated order has every session's key alone
		from, to = f.UpdatedFrom, f.UpdatedTo
	}
	prefix := listPrefix(pred)
	at := func(s *fsmpb.Session) int64 {
		if order == ListByUpdated {
			return s.UpdatedAtMs
		}
		return s.CreatedAtMs
	}
	// A position outside the range (a token of another filter) is the
	// range's start.
	if after != nil && (!desc && from != 0 && after.At < from || desc && to != 0 && after.At >= to) {
		after = nil
	}
	var seek, skip []byte
	switch {
	case after != nil:
		seek = listKey(pred, after.At, after.ID)
		skip = seek
	case desc && to != 0:
		seek = listKey(pred, to, "")[:len(prefix)+8] // before every key at to
	case desc:
		seek = append([]byte(pred), 1) // after every key of pred
	case from != 0:
		seek = listKey(pred, from, "")[:len(prefix)+8]
	default:
		seek = prefix
	}
	var it *cowdb.Iterator
	var err error
	if desc {
		it, err = t.mem().ReverseLowerBound(TableSessions, order.index(), seek)
	} else {
		it, err = t.mem().LowerBound(TableSessions, order.index(), seek)
	}
	if err != nil {
		panic(fmt.Sprintf("store: list sessions: %v", err))
	}
	var out []*fsmpb.Session
	var last ListPosition // the entry examined last
	scanned := 0
	for raw := it.Next(); raw != nil; raw = it.Next() {
		s := raw.(*fsmpb.Session)
		when := at(s)
		key := it.Key()
		if !bytes.HasPrefix(key, prefix) {
			break
		}
		if skip != nil && bytes.Equal(key, skip) {
			continue
		}
		if desc && from != 0 && when < from || !desc && to != 0 && when >= to {
			break
		}
		// There is more to read: stop at a full page, or at the scan
		// bound, where the entry examined last is where to go on from.
		if len(out) == limit || scanned == MaxListScan {
			return out, &last
		}
		scanned++
		last = ListPosition{At: when, ID: s.Id}
		if f.Matches(s) {
			out = append(out, s)
		}
	}
	return out, nil
}
