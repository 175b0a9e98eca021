// Package fsm is Dex's replicated state machine: sessions, turns, Steps and
// attempts. Apply is deterministic: time comes in the command, iteration is in
// index order, and nothing here reads a clock, draws a random number or does I/O.
//
// This package holds the command table and the rules (turns, Steps,
// attempts, pauses, budgets, tokens, the catalog, agents) and State, the read
// API. The rows they decide on are kept by package fsm/store: its schema and
// table registry, keys and indexes, typed row access and the snapshot codec.
package fsm

import (
	"fmt"
	"sync"
	"sync/atomic"

	"google.golang.org/protobuf/proto"

	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/fsm/store"
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

// FSM holds the state in the store (fsm/store). Readers take consistent snapshots through
// State without ever waiting for Apply: the current db is swapped atomically.
type FSM struct {
	opts Options

	mu     sync.Mutex // serialises Apply, Restore and halting
	cur    atomic.Pointer[store.DB]
	halted atomic.Pointer[HaltError] // written under mu, read without it
}

// routing is what the rules tell the store's rule-keyed indexes: which
// ready queue a kind's queued Steps wait in, which agents a Worker runs the
// model for.
var routing = store.Routing{
	StepQueue: func(k fsmpb.StepKind) store.Queue {
		switch Kind(k).Runner {
		case RunsOnModel:
			return store.ModelQueue
		case RunsOnTool:
			return store.ToolQueue
		}
		return store.NoQueue
	},
	ModelAgents: ModelAgents,
}

func newStore() *store.DB { return store.New(routing) }

// New returns an empty state machine.
func New(opts Options) *FSM {
	f := &FSM{opts: opts}
	f.cur.Store(newStore())
	return f
}

func (f *FSM) db() *store.DB { return f.cur.Load() }

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
	if h := f.halted.Load(); h != nil {
		return h
	}
	return nil
}

// Encode turns a command into the bytes of a log entry.
func Encode(cmd *fsmpb.Command) ([]byte, error) {
	return proto.MarshalOptions{Deterministic: true}.Marshal(cmd)
}

// ApplyEntry applies one committed log entry.
func (f *FSM) ApplyEntry(index uint64, data []byte) *Result {
	return f.ApplyBatch([]Entry{{Index: index, Data: data}})[0]
}

// Entry is one committed log entry.
type Entry struct {
	Index uint64
	Data  []byte
}

// ApplyBatch applies committed entries in log order in one write
// transaction, so a batch pays once for what every write transaction costs;
// the state it leaves is the state of applying them one by one.
func (f *FSM) ApplyBatch(entries []Entry) []*Result {
	f.mu.Lock()
	results, touches := f.applyBatch(entries)
	f.mu.Unlock()
	for i, e := range entries {
		f.notifyApplied(e.Index, touches[i])
	}
	return results
}

// applyBatch applies the entries in one transaction. A rejected command must
// change nothing but the applied index, and the transaction cannot undo one
// command alone: on a rejection the transaction starts over with the
// entries accepted so far, then goes on after the rejected one.
func (f *FSM) applyBatch(entries []Entry) ([]*Result, []*touched) {
	results := make([]*Result, len(entries))
	touches := make([]*touched, len(entries))
	cmds := make([]*fsmpb.Command, len(entries))
	tx := f.db().Txn(true)
	defer func() { tx.Abort() }()
	var m *fsmpb.ClusterMeta // shared by the batch's commands, written once
	run := func(i int) *Result {
		a := &applier{tx: tx, now: cmds[i].NowMs, index: entries[i].Index, m: m}
		res := a.apply(cmds[i])
		m = a.meta()
		touches[i] = &a.touched
		return res
	}
	last := -1 // the last entry applied (accepted, rejected or skipped)
	for i, e := range entries {
		if h := f.halted.Load(); h != nil {
			results[i] = &Result{Index: e.Index, Err: reject(CodeFailedPrecondition, "state machine halted: %v", h)}
			continue
		}
		cmd := &fsmpb.Command{}
		if err := cmd.UnmarshalVT(e.Data); err != nil {
			results[i] = f.halt(e.Index, fmt.Sprintf("entry does not decode as a command: %v", err))
			continue
		}
		if cmd.Body == nil && !cmd.Ignorable {
			results[i] = f.halt(e.Index, "unknown command type (upgrade this node to the version that wrote it)")
			continue
		}
		last = i
		if m == nil {
			m = (&applier{tx: tx}).meta()
		}
		if cmd.Body == nil {
			results[i] = &Result{Index: e.Index, Ignored: true, Epoch: m.Epoch}
			continue
		}
		cmds[i] = cmd
		res := run(i)
		if res.Err != nil {
			tx.Abort()
			tx, m = f.db().Txn(true), nil
			for j := range i {
				if cmds[j] != nil && results[j].Err == nil {
					run(j)
				}
			}
			touches[i] = nil
			if m == nil {
				m = (&applier{tx: tx}).meta()
			}
		}
		res.Index = e.Index
		res.Epoch = m.Epoch // the epoch once this entry is applied
		results[i] = res
	}
	if last < 0 {
		return results, touches
	}
	m.AppliedIndex = entries[last].Index
	(&applier{tx: tx}).putMeta(m)
	tx.Commit()
	return results, touches
}

func (f *FSM) halt(index uint64, reason string) *Result {
	h := &HaltError{Index: index, Reason: reason}
	f.halted.Store(h)
	if f.opts.OnHalt != nil {
		f.opts.OnHalt(h)
	}
	return &Result{Index: index, Err: reject(CodeFailedPrecondition, "%v", h)}
}

// State returns a read-only, consistent view of the state now. It never
// waits for Apply.
func (f *FSM) State() *State {
	cur := f.cur.Load()
	return &State{tx: cur.Txn(false), abandon: cur.Abandoned()}
}
