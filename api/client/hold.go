package client

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// Holds driven by the environment: a harness such as dexchaos certify
// pauses a Worker at a moment without a change to its code.
const (
	// HoldEnv lists the moments to hold at, comma separated (Moments).
	// It needs LedgerEnv: the hold files sit beside the ledger.
	HoldEnv = "DEX_HOLD"
	// HoldAllEnv "1" holds every occurrence of a moment, not only the first.
	HoldAllEnv = "DEX_HOLD_ALL"
)

// ParseMoments reads a comma-separated list of hold moments.
func ParseMoments(s string) (map[string]bool, error) {
	m := map[string]bool{}
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if !slices.Contains(Moments, p) {
			return nil, fmt.Errorf("unknown hold moment %q (known: %s)", p, strings.Join(Moments, ", "))
		}
		m[p] = true
	}
	return m, nil
}

// FileHolder pauses a Worker at named moments until a harness releases it:
// it writes "MOMENT step=… session=… kind=… tool=… attempt=… pid=…" to the
// file <ledger>.held and "held MOMENT step=STEP pid=PID" to out, then waits
// for the file <ledger>.release (which it removes) or a signal on sig. One
// hold at a time; each moment is held once unless all.
type FileHolder struct {
	moments map[string]bool
	all     bool
	heldF   string
	relF    string
	signal  <-chan os.Signal
	out     io.Writer
	poll    time.Duration

	mu   sync.Mutex // one hold at a time
	done map[string]bool
}

// NewFileHolder returns a holder whose files sit beside ledger; sig may be
// nil.
func NewFileHolder(moments map[string]bool, all bool, ledger string, sig <-chan os.Signal, out io.Writer) *FileHolder {
	return &FileHolder{
		moments: moments, all: all, heldF: ledger + ".held", relF: ledger + ".release",
		signal: sig, out: out, poll: 20 * time.Millisecond, done: map[string]bool{},
	}
}

// holdFromEnv is the holder $DEX_HOLD asks for (nil when it is unset).
func holdFromEnv() (func(string, *dexv1.Task), error) {
	spec := os.Getenv(HoldEnv)
	if strings.TrimSpace(spec) == "" {
		return nil, nil
	}
	moments, err := ParseMoments(spec)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", HoldEnv, err)
	}
	ledger := os.Getenv(LedgerEnv)
	if ledger == "" {
		return nil, fmt.Errorf("%s is set but %s is not: the hold files sit beside the ledger", HoldEnv, LedgerEnv)
	}
	return NewFileHolder(moments, os.Getenv(HoldAllEnv) == "1", ledger, nil, os.Stderr).Hold, nil
}

// Hold is a Worker's Hold hook.
func (h *FileHolder) Hold(moment string, t *dexv1.Task) {
	if !h.moments[moment] {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done[moment] && !h.all {
		return
	}
	h.done[moment] = true
	// A release left over from before this hold does not count.
	_ = os.Remove(h.relF)
	for drained := false; !drained; {
		select {
		case <-h.signal:
		default:
			drained = true
		}
	}
	step := t.GetRef().GetStepId()
	desc := fmt.Sprintf("%s step=%s session=%s kind=%s tool=%s attempt=%d pid=%d",
		moment, step, t.GetSessionId(), t.GetKind(), t.GetTool(), t.GetRef().GetAttempt(), os.Getpid())
	if err := os.WriteFile(h.heldF, []byte(desc+"\n"), 0o644); err != nil {
		fmt.Fprintf(h.out, "hold: %v\n", err)
	}
	fmt.Fprintf(h.out, "held %s step=%s pid=%d\n", moment, step, os.Getpid())
	tick := time.NewTicker(h.poll)
	defer tick.Stop()
	for released := false; !released; {
		select {
		case <-h.signal:
			released = true
		case <-tick.C:
			if _, err := os.Stat(h.relF); err == nil {
				_ = os.Remove(h.relF)
				released = true
			}
		}
	}
	_ = os.Remove(h.heldF)
	fmt.Fprintf(h.out, "released %s step=%s pid=%d\n", moment, step, os.Getpid())
}
