package main

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/dexhq/dex/api/client"
)

// maxRunTimeout is the longest run timeout the cluster stores (ms in 32 bits).
const maxRunTimeout = time.Duration(math.MaxUint32) * time.Millisecond

// parseRunTimeouts reads --tool-run-timeout: TOOL=DURATION[,TOOL=DURATION],
// each naming a demo tool that runs as a Step (not the inline calc).
func parseRunTimeouts(v string, tools []client.Tool) (map[string]time.Duration, error) {
	out := map[string]time.Duration{}
	if v == "" {
		return out, nil
	}
	known := map[string]bool{}
	for _, t := range tools {
		known[t.Spec.Name] = !t.Spec.Inline
	}
	for _, part := range strings.Split(v, ",") {
		name, dur, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("--tool-run-timeout %q: want TOOL=DURATION[,TOOL=DURATION]", part)
		}
		runsAsStep, found := known[name]
		switch {
		case !found:
			return nil, fmt.Errorf("--tool-run-timeout: no demo tool %q", name)
		case !runsAsStep:
			return nil, fmt.Errorf("--tool-run-timeout: %q is inline: it runs inside the model call (see --model-run-timeout)", name)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("--tool-run-timeout: %q given twice", name)
		}
		d, err := time.ParseDuration(dur)
		if err != nil || d < time.Millisecond || d > maxRunTimeout {
			return nil, fmt.Errorf("--tool-run-timeout %s: want a duration from 1ms to %s", part, maxRunTimeout)
		}
		out[name] = d
	}
	return out, nil
}
