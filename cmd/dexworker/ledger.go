package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"
)

// LedgerEntry is one line of the side-effect ledger: one tool execution
// (or model / compaction call), written when the handler starts.
type LedgerEntry struct {
	Session        string `json:"session"`
	CallID         string `json:"call_id"`
	Tool           string `json:"tool"`
	Attempt        uint32 `json:"attempt"`
	IdempotencyKey string `json:"idempotency_key"`
	PID            int    `json:"pid"`
	Time           string `json:"time"`
	// Extras: the Step, what ran ("tool", "poll", "model", "compact") and
	// the polled task of a long-running tool.
	Step   string `json:"step,omitempty"`
	Kind   string `json:"kind,omitempty"`
	TaskID string `json:"task_id,omitempty"`
	Worker string `json:"worker,omitempty"`
	// Epoch: the dispatch epoch the attempt was handed under.
	Epoch uint64 `json:"epoch,omitempty"`
	// Agent: the session's agent, on model and compaction calls (empty: the
	// default agent).
	Agent string `json:"agent,omitempty"`
}

// Ledger appends entries to a file, one JSON line each, fsynced before
// Append returns, so a line survives a SIGKILL right after it.
type Ledger struct {
	mu   sync.Mutex
	f    *os.File
	pid  int
	now  func() time.Time
	path string
}

// OpenLedger opens (creating) path for appending.
func OpenLedger(path string) (*Ledger, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open ledger: %w", err)
	}
	return &Ledger{f: f, pid: os.Getpid(), now: time.Now, path: path}, nil
}

// Append writes e (with pid and time filled in) as one line and fsyncs it.
func (l *Ledger) Append(e LedgerEntry) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	e.PID = l.pid
	e.Time = l.now().UTC().Format(time.RFC3339Nano)
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if _, err := l.f.Write(b); err != nil {
		return fmt.Errorf("write ledger: %w", err)
	}
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("sync ledger: %w", err)
	}
	return nil
}

// Close closes the file.
func (l *Ledger) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Close()
}
