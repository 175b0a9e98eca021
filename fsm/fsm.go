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
// the state it leaves is the state of applying them one by one. An entry
// holding a Batch applies its commands in order, as entries of their own.
func (f *FSM) ApplyBatch(entries []Entry) []*Result {
	f.mu.Lock()
	results, touches := f.applyBatch(entries)
	f.mu.Unlock()
	for i, e := range entries {
		if len(touches[i]) == 0 {
			f.notifyApplied(e.Index, nil)
		}
		for _, t := range touches[i] {
			f.notifyApplied(e.Index, t)
		}
	}
	return results
}

// step is one command of the entries being applied: an entry's own, or the
// n-th (from 1) of a Batch entry's.
type step struct {
	index uint64
	n     int
	cmd   *fsmpb.Command
	entry int // the entry's place in the batch raft handed over
}

// applyBatch applies the entries in one transaction. A rejected command must
// change nothing but the applied index, and the transaction cannot undo one
// command alone: on a rejection the transaction starts over with the
// commands accepted so far, then goes on after the rejected one.
func (f *FSM) applyBatch(entries []Entry) ([]*Result, [][]*touched) {
	results := make([]*Result, len(entries))
	touches := make([][]*touched, len(entries))
	tx := f.db().Txn(true)
	defer func() { tx.Abort() }()
	var m *fsmpb.ClusterMeta // shared by the batch's commands, written once
	var accepted []step      // to apply again after a rejection
	run := func(s step) *Result {
		a := &applier{tx: tx, now: s.cmd.NowMs, index: s.index, n: s.n, m: m}
		res := a.apply(s.cmd)
		m = a.meta()
		if res.Err == nil {
			touches[s.entry] = append(touches[s.entry], &a.touched)
		}
		return res
	}
	apply := func(s step) *Result {
		res := run(s)
		if res.Err != nil {
			tx.Abort()
			tx, m = f.db().Txn(true), nil
			for i := range touches {
				touches[i] = touches[i][:0]
			}
			for _, prev := range accepted {
				run(prev)
			}
		} else {
			accepted = append(accepted, s)
		}
		if m == nil {
			m = (&applier{tx: tx}).meta()
		}
		res.Index = s.index
		res.Epoch = m.Epoch // the epoch once this command is applied
		return res
	}
	last := -1 // the last entry applied (accepted, rejected or skipped)
	for i, e := range entries {
		if h := f.halted.Load(); h != nil {
			results[i] = &Result{Index: e.Index, Err: reject(CodeFailedPrecondition, "state machine halted: %v", h)}
			continue
		}
		cmd, cmds, reason := decodeEntry(e.Data)
		if reason != "" {
			results[i] = f.halt(e.Index, reason)
			continue
		}
		last = i
		if m == nil {
			m = (&applier{tx: tx}).meta()
		}
		switch {
		case cmds != nil:
			res := &Result{Index: e.Index, Batch: make([]*Result, len(cmds))}
			for j, c := range cmds {
				if c.Body == nil { // ignorable, of a type this node does not know
					res.Batch[j] = &Result{Index: e.Index, Ignored: true, Epoch: m.Epoch}
					continue
				}
				res.Batch[j] = apply(step{index: e.Index, n: j + 1, cmd: c, entry: i})
			}
			res.Epoch = m.Epoch
			results[i] = res
		case cmd.Body == nil:
			results[i] = &Result{Index: e.Index, Ignored: true, Epoch: m.Epoch}
		default:
			results[i] = apply(step{index: e.Index, cmd: cmd, entry: i})
		}
	}
	if last < 0 {
		return results, touches
	}
	m.AppliedIndex = entries[last].Index
	(&applier{tx: tx}).putMeta(m)
	tx.Commit()
	return results, touches
}

// decodeEntry reads a log entry: one command, or a Batch entry's commands
// (cmds, nil otherwise). A reason means the entry cannot be applied and the
// state machine must halt.
func decodeEntry(data []byte) (cmd *fsmpb.Command, cmds []*fsmpb.Command, reason string) {
	cmd = &fsmpb.Command{}
	if err := cmd.UnmarshalVT(data); err != nil {
		return nil, nil, fmt.Sprintf("entry does not decode as a command: %v", err)
	}
	if cmd.Body == nil && !cmd.Ignorable {
		return nil, nil, "unknown command type (upgrade this node to the version that wrote it)"
	}
	b := cmd.GetBatch()
	if b == nil {
		return cmd, nil, ""
	}
	cmds = make([]*fsmpb.Command, len(b.Commands))
	for j, d := range b.Commands {
		c := &fsmpb.Command{}
		if err := c.UnmarshalVT(d); err != nil {
			return nil, nil, fmt.Sprintf("command %d of a batch entry does not decode: %v", j+1, err)
		}
		if c.Body == nil && !c.Ignorable {
			return nil, nil, fmt.Sprintf("command %d of a batch entry is of an unknown type (upgrade this node to the version that wrote it)", j+1)
		}
		cmds[j] = c
	}
	return nil, cmds, ""
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
