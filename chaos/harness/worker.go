package harness

import (
	"context"
	"fmt"
	"github.com/dexhq/dex/api/client"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Worker is one dexworker process with its side-effect ledger.
type Worker struct {
	Proc
	Ledger string
}

// WorkerOptions configure a dexworker.
type WorkerOptions struct {
	BinDir string
	Dir    string
	Name   string
	Target string // dex:///a,b,c or a load balancer's host:port
	Ledger string // shared by the Workers of one scenario
	Script string // optional script file
	Hold   []string
	Args   []string
	// Token is the Worker's ACL token, given as $DEX_TOKEN.
	Token string
	// TLS, when set, gives the Worker the PKI's client certificate.
	TLS *PKI
	// Lang picks the demo Worker's library: go (default), python or
	// typescript (WorkerLanguages).
	Lang string
	// Adapter, with Lang typescript, drives the demo Worker's scripted
	// model through a framework adapter (WorkerAdapters).
	Adapter string
}

// NewWorker prepares (but does not start) a dexworker.
func NewWorker(o WorkerOptions) *Worker {
	args := []string{"--addr", o.Target, "--ledger", o.Ledger, "--id", o.Name}
	if o.Script != "" {
		args = append(args, "--script", o.Script)
	}
	if len(o.Hold) > 0 {
		args = append(args, "--hold", strings.Join(o.Hold, ","))
	}
	if o.TLS != nil {
		args = append(args, Args(o.TLS.ClientFiles())...)
	}
	if o.Adapter != "" {
		args = append(args, "--adapter", o.Adapter)
	}
	args = append(args, o.Args...)
	w := &Worker{
		Proc:   Proc{Name: o.Name, Bin: WorkerBinary(o.BinDir, o.Lang), Args: args, LogPath: filepath.Join(o.Dir, o.Name+".log")},
		Ledger: o.Ledger,
	}
	if o.Token != "" {
		w.Env = append(w.Env, client.TokenEnv+"="+o.Token)
	}
	return w
}

// WaitHeld waits until the Worker holds at a moment and returns the hold's
// description ("MOMENT step=… session=… …").
func (w *Worker) WaitHeld(ctx context.Context) (string, error) {
	for {
		if b, err := os.ReadFile(w.Ledger + ".held"); err == nil && len(b) > 0 {
			return strings.TrimSpace(string(b)), nil
		}
		if !w.Running() {
			return "", fmt.Errorf("%s exited while waiting for a hold: %s", w.Name, Tail(w.Log(), 5))
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("%s never held: %w", w.Name, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Release lets a held Worker go on.
func (w *Worker) Release() error {
	return os.WriteFile(w.Ledger+".release", []byte("go\n"), 0o644)
}

// Tail is the last n lines of s: a process log's tail, for an error
// message or a report.
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// KeepFile copies src to dst (best effort): a log kept for a report.
func KeepFile(src, dst string) {
	b, err := os.ReadFile(src)
	if err != nil {
		return
	}
	_ = os.WriteFile(dst, b, 0o644)
}
