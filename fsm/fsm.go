// Package fsm is Dex's replicated state machine: sessions, turns, Steps and
// attempts. Apply is deterministic: time comes in the command, iteration is in
// index order, and nothing here reads a clock, draws a random number or does I/O.
package fsm

import (
	"fmt"
	"sync"
	"sync/atomic"

	memdb "github.com/hashicorp/go-memdb"
	"google.golang.org/protobuf/proto"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// Options configure a state machine.
type Options struct {
	// OnHalt is called once when a log entry cannot be applied (an unknown
	// command type not marked ignorable, an entry that does not decode). The
	// node must stop: applying later entries would diverge from its peers.
	OnHalt func(error)
	// OnApplied is called after each applied entry committed, in log order,
	// with what it wrote; the leader's broker is fed from it. It must not
	// block on Apply.
	OnApplied func(*Applied)
}

// FSM holds the state in go-memdb. Readers take consistent snapshots through
// State without ever waiting for Apply: the current db is swapped atomically.
type FSM struct {
	opts Options

	mu     sync.Mutex // serialises Apply, Restore and halting
	cur    atomic.Pointer[store]
	halted error
}

// store is one db and the channel closed when a Restore replaces it, so
// readers watching the old db wake up and read the new one.
type store struct {
	db      *memdb.MemDB
	abandon chan struct{}
}

func newStore() *store {
	db, err := memdb.NewMemDB(schema())
	if err != nil {
		panic(fmt.Sprintf("fsm: schema: %v", err)) // the schema is static
	}
	return &store{db: db, abandon: make(chan struct{})}
}

// New returns an empty state machine.
func New(opts Options) *FSM {
	f := &FSM{opts: opts}
	f.cur.Store(newStore())
	return f
}

func (f *FSM) db() *memdb.MemDB { return f.cur.Load().db }

// HaltError is the error an FSM stops with.
type HaltError struct {
	Index  uint64
	Reason string
}

func (e *HaltError) Error() string {
	return fmt.Sprintf("log entry %d cannot be applied: %s; this node stops so it does not diverge from its peers", e.Index, e.Reason)
}

// Halted reports the error the state machine stopped with, if any.
func (f *FSM) Halted() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.halted
}

// Encode turns a command into the bytes of a log entry.
func Encode(cmd *dexv1.Command) ([]byte, error) {
	return proto.MarshalOptions{Deterministic: true}.Marshal(cmd)
}

// ApplyEntry applies one committed log entry.
func (f *FSM) ApplyEntry(index uint64, data []byte) *Result {
	res, t := f.applyEntry(index, data)
	f.notifyApplied(index, t)
	return res
}

func (f *FSM) applyEntry(index uint64, data []byte) (*Result, *touched) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.halted != nil {
		return &Result{Index: index, Err: reject(CodeFailedPrecondition, "state machine halted: %v", f.halted)}, nil
	}
	cmd := &dexv1.Command{}
	if err := proto.Unmarshal(data, cmd); err != nil {
		return f.halt(index, fmt.Sprintf("entry does not decode as a command: %v", err)), nil
	}
	if cmd.Body == nil {
		if cmd.Ignorable {
			return f.commitNoop(index), nil
		}
		return f.halt(index, "unknown command type (upgrade this node to the version that wrote it)"), nil
	}
	tx := f.db().Txn(true)
	defer tx.Abort()
	a := &applier{tx: tx, now: cmd.NowMs, index: index}
	res := a.apply(cmd)
	res.Index = index
	if res.Err != nil {
		// A rejected command changes nothing but the applied index.
		tx.Abort()
		tx = f.db().Txn(true)
		a = &applier{tx: tx, now: cmd.NowMs, index: index}
	}
	m := a.meta()
	m.AppliedIndex = index
	a.putMeta(m)
	res.Epoch = m.Epoch
	tx.Commit()
	return res, &a.touched
}

func (f *FSM) commitNoop(index uint64) *Result {
	tx := f.db().Txn(true)
	a := &applier{tx: tx, index: index}
	m := a.meta()
	m.AppliedIndex = index
	a.putMeta(m)
	tx.Commit()
	return &Result{Index: index, Ignored: true, Epoch: m.Epoch}
}

func (f *FSM) halt(index uint64, reason string) *Result {
	f.halted = &HaltError{Index: index, Reason: reason}
	if f.opts.OnHalt != nil {
		f.opts.OnHalt(f.halted)
	}
	return &Result{Index: index, Err: reject(CodeFailedPrecondition, "%v", f.halted)}
}

// State returns a read-only, consistent view of the state now. It never
// waits for Apply.
func (f *FSM) State() *State {
	cur := f.cur.Load()
	return &State{tx: cur.db.Txn(false), abandon: cur.abandon}
}
