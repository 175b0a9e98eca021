package client

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// LedgerEnv names the execution ledger file. When it is set, a Worker
// appends one line per handler start and end, and SideEffect one line per
// reported side effect (docs/ledger.md). A Worker whose ledger cannot be
// opened refuses to start: an uncounted execution would void the count.
const LedgerEnv = "DEX_LEDGER"

// Ledger phases and outcomes (docs/ledger.md).
const (
	LedgerStart  = "start"
	LedgerEnd    = "end"
	LedgerEffect = "effect"

	LedgerOK        = "ok"
	LedgerError     = "error"
	LedgerCancelled = "cancelled"
)

// LedgerLine is one line of the execution ledger. Every field is written on
// every line but Outcome (end lines), Effect and EffectKey (effect lines).
type LedgerLine struct {
	Session        string `json:"session"`
	Step           string `json:"step"`
	Attempt        uint32 `json:"attempt"`
	Kind           string `json:"kind"` // model, compact, tool or poll
	Tool           string `json:"tool"`
	CallID         string `json:"call_id"`
	IdempotencyKey string `json:"idempotency_key"`
	TaskID         string `json:"task_id"`
	Epoch          uint64 `json:"epoch"`
	Worker         string `json:"worker"`
	PID            int    `json:"pid"`
	Time           string `json:"time"`
	Phase          string `json:"phase"`
	Outcome        string `json:"outcome,omitempty"`
	Effect         string `json:"effect,omitempty"`
	EffectKey      string `json:"effect_key,omitempty"`
}

// Ledger appends lines to a file opened with O_APPEND (several processes
// may share it), each fsynced before Append returns, so a line survives a
// SIGKILL right after it.
type Ledger struct {
	mu  sync.Mutex
	f   *os.File
	pid int
}

// OpenLedger opens (creating) path for appending.
func OpenLedger(path string) (*Ledger, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open ledger: %w", err)
	}
	return &Ledger{f: f, pid: os.Getpid()}, nil
}

// Append writes l, with pid and time filled in, as one line and fsyncs it.
func (l *Ledger) Append(line LedgerLine) error {
	line.PID = l.pid
	line.Time = time.Now().UTC().Format(time.RFC3339Nano)
	b, err := json.Marshal(line)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("write ledger: %w", err)
	}
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("sync ledger: %w", err)
	}
	return nil
}

// Close closes the file.
func (l *Ledger) Close() error { return l.f.Close() }

// ledgerFromEnv opens $DEX_LEDGER, or returns nil when it is unset.
func ledgerFromEnv() (*Ledger, error) {
	path := os.Getenv(LedgerEnv)
	if path == "" {
		return nil, nil
	}
	l, err := OpenLedger(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", LedgerEnv, err)
	}
	return l, nil
}

// ledgerKinds names a Step's handler in the ledger.
var ledgerKinds = map[dexv1.TaskHandler]string{
	dexv1.TaskHandler_TASK_HANDLER_MODEL: "model", dexv1.TaskHandler_TASK_HANDLER_COMPACT: "compact",
	dexv1.TaskHandler_TASK_HANDLER_POLL: "poll", dexv1.TaskHandler_TASK_HANDLER_TOOL: "tool",
}

// ledgerLine is the start line of task t run by worker.
func ledgerLine(t *dexv1.Task, worker string) LedgerLine {
	return LedgerLine{Session: t.SessionId, Step: t.Ref.GetStepId(), Attempt: t.Ref.GetAttempt(),
		Kind: ledgerKinds[t.Handler], Tool: t.Tool, CallID: t.CallId,
		IdempotencyKey: t.IdempotencyKey, TaskID: t.TaskId, Epoch: t.Epoch, Worker: worker, Phase: LedgerStart}
}

// ledgerOutcome is how a handler ended: ok with a result, cancelled when
// its context ended first, error otherwise.
func ledgerOutcome(ctx context.Context, out outcome) string {
	switch {
	case out.complete != nil:
		return LedgerOK
	case ctx.Err() != nil:
		return LedgerCancelled
	default:
		return LedgerError
	}
}

type ledgerCtxKey struct{}

// ledgerCall is what SideEffect needs of the running handler.
type ledgerCall struct {
	l    *Ledger
	line LedgerLine
}

// SideEffect records, in the execution ledger, that the running tool
// handler made the side effect name with the idempotency key key (the key
// the tool really used; "" for none). A tool that reports its side effects
// is counted by them instead of by its handler runs. Without a ledger, or
// outside a handler's ctx, it does nothing. An error means the line was not
// written.
func SideEffect(ctx context.Context, name, key string) error {
	c, ok := ctx.Value(ledgerCtxKey{}).(ledgerCall)
	if !ok {
		return nil
	}
	line := c.line
	line.Phase, line.Effect, line.EffectKey = LedgerEffect, name, key
	return c.l.Append(line)
}
