package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// holder pauses the Worker at named moments until a harness releases it:
// it writes "held MOMENT step=STEP pid=PID" to stderr and the file
// <ledger>.held, then waits for SIGUSR1 or the file <ledger>.release (which
// it removes). One hold at a time; each moment is held once unless all.
type holder struct {
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

func parseMoments(s string) (map[string]bool, error) {
	m := map[string]bool{}
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if !slices.Contains(client.Moments, p) {
			return nil, fmt.Errorf("unknown hold moment %q (known: %s)", p, strings.Join(client.Moments, ", "))
		}
		m[p] = true
	}
	return m, nil
}

func newHolder(moments map[string]bool, all bool, ledger string, sig <-chan os.Signal, out io.Writer) *holder {
	return &holder{
		moments: moments, all: all, heldF: ledger + ".held", relF: ledger + ".release",
		signal: sig, out: out, poll: 20 * time.Millisecond, done: map[string]bool{},
	}
}

// Hold is the Worker's Hold hook.
func (h *holder) Hold(moment string, t *dexv1.Task) {
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
	for {
		select {
		case <-h.signal:
		case <-tick.C:
			if _, err := os.Stat(h.relF); err != nil {
				continue
			}
			_ = os.Remove(h.relF)
		}
		break
	}
	_ = os.Remove(h.heldF)
	fmt.Fprintf(h.out, "released %s step=%s pid=%d\n", moment, step, os.Getpid())
}
