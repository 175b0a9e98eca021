package store

import (
	"encoding/binary"
	"fmt"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// Typed key indexers for the tables every command writes: go-memdb's field
// indexers read fields by reflection and allocate for each part of a key;
// these build the same keys (a string and a NUL; a uint64 big endian) in one
// allocation.

// stringKey indexes rows by one string field: the key is the string and a NUL,
// so keys sort as the strings do and none is a prefix of another.
type stringKey[T any] struct{ field func(T) string }

func (x stringKey[T]) FromObject(obj any) (bool, []byte, error) {
	v, ok := obj.(T)
	if !ok {
		return false, nil, fmt.Errorf("string key: %T is not a %T", obj, *new(T))
	}
	s := x.field(v)
	if s == "" {
		return false, nil, nil
	}
	return true, append([]byte(s), 0), nil
}

func (x stringKey[T]) FromArgs(args ...any) ([]byte, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("string key takes one argument, got %d", len(args))
	}
	s, ok := args[0].(string)
	if !ok {
		return nil, fmt.Errorf("string key argument must be a string, got %T", args[0])
	}
	return append([]byte(s), 0), nil
}

// sessionSeqKey indexes a session's rows by (session, seq): the session id,
// a NUL, the seq big endian, so a session's rows are contiguous and in order.
type sessionSeqKey[T any] struct {
	session func(T) string
	seq     func(T) uint64
}

func sessionSeqBytes(session string, seq uint64) []byte {
	k := make([]byte, 0, len(session)+9)
	return binary.BigEndian.AppendUint64(append(append(k, session...), 0), seq)
}

func (x sessionSeqKey[T]) FromObject(obj any) (bool, []byte, error) {
	v, ok := obj.(T)
	if !ok {
		return false, nil, fmt.Errorf("session seq key: %T is not a %T", obj, *new(T))
	}
	return true, sessionSeqBytes(x.session(v), x.seq(v)), nil
}

func (x sessionSeqKey[T]) FromArgs(args ...any) ([]byte, error) {
	if len(args) != 2 {
		return nil, fmt.Errorf("session seq key takes (session, seq), got %d arguments", len(args))
	}
	session, ok1 := args[0].(string)
	seq, ok2 := args[1].(uint64)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("session seq key takes (string, uint64), got (%T, %T)", args[0], args[1])
	}
	return sessionSeqBytes(session, seq), nil
}

// PrefixFromArgs takes a session id: all of that session's rows.
func (x sessionSeqKey[T]) PrefixFromArgs(args ...any) ([]byte, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("session seq key prefix takes a session id, got %d arguments", len(args))
	}
	session, ok := args[0].(string)
	if !ok {
		return nil, fmt.Errorf("session seq key prefix takes a string, got %T", args[0])
	}
	return append([]byte(session), 0), nil
}

// acceptedKey indexes accepted message ids by (session, message id).
type acceptedKey struct{}

func acceptedBytes(session, messageID string) []byte {
	k := make([]byte, 0, len(session)+len(messageID)+2)
	return append(append(append(append(k, session...), 0), messageID...), 0)
}

func (acceptedKey) FromObject(obj any) (bool, []byte, error) {
	m, ok := obj.(*fsmpb.AcceptedMessage)
	if !ok {
		return false, nil, fmt.Errorf("accepted key: %T is not an AcceptedMessage", obj)
	}
	return true, acceptedBytes(m.SessionId, m.MessageId), nil
}

func (acceptedKey) FromArgs(args ...any) ([]byte, error) {
	if len(args) != 2 {
		return nil, fmt.Errorf("accepted key takes (session, message id), got %d arguments", len(args))
	}
	session, ok1 := args[0].(string)
	msg, ok2 := args[1].(string)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("accepted key takes (string, string), got (%T, %T)", args[0], args[1])
	}
	return acceptedBytes(session, msg), nil
}

var (
	sessionKey  = stringKey[*fsmpb.Session]{func(s *fsmpb.Session) string { return s.Id }}
	metaKey     = stringKey[*fsmpb.ClusterMeta]{func(m *fsmpb.ClusterMeta) string { return m.Id }}
	eventLogKey = stringKey[*fsmpb.EventLog]{func(l *fsmpb.EventLog) string { return l.SessionId }}
	historyKey  = sessionSeqKey[*fsmpb.HistoryEntry]{
		func(h *fsmpb.HistoryEntry) string { return h.SessionId }, func(h *fsmpb.HistoryEntry) uint64 { return h.Seq }}
	inboxKey = sessionSeqKey[*fsmpb.InboxMessage]{
		func(m *fsmpb.InboxMessage) string { return m.SessionId }, func(m *fsmpb.InboxMessage) uint64 { return m.Seq }}
	// eventPageKey keys a page by (session, page key): sessionSeqKey's
	// session id, NUL and key big endian, so one session's pages are
	// contiguous and in order, and the prefix of one session never covers
	// another whose id it begins.
	eventPageKey = sessionSeqKey[*EventPage]{
		func(p *EventPage) string { return p.SessionID }, func(p *EventPage) uint64 { return p.Key }}
)
