package main

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// providerStatusJSON is a provider in `status --json`: its limits (0:
// none), what partition 0's leader counts against them, and its hold.
type providerStatusJSON struct {
	Provider        string            `json:"provider"`
	MaxConcurrent   uint32            `json:"max_concurrent"`
	CallsPerMinute  uint32            `json:"calls_per_minute"`
	TokensPerMinute uint64            `json:"tokens_per_minute"`
	Running         uint32            `json:"running"`
	Throttled       uint32            `json:"throttled"`
	Hold            *providerHoldJSON `json:"hold,omitempty"`
}

// providerHoldJSON is a provider's hold; RemainingMs is until_ms less the
// time dexctl printed it (0 once it has passed).
type providerHoldJSON struct {
	UntilMs     int64  `json:"until_ms"`
	RemainingMs int64  `json:"remaining_ms"`
	StepID      string `json:"step_id"`
	SetAtMs     int64  `json:"set_at_ms"`
}

func providersJSON(ps []*dexv1.ProviderStatus, now time.Time) []providerStatusJSON {
	out := []providerStatusJSON{}
	for _, p := range ps {
		pj := providerStatusJSON{Provider: p.Provider, MaxConcurrent: p.MaxConcurrent, CallsPerMinute: p.CallsPerMinute,
			TokensPerMinute: p.TokensPerMinute, Running: p.Running, Throttled: p.Throttled}
		if h := p.Hold; h != nil {
			pj.Hold = &providerHoldJSON{UntilMs: h.UntilMs, RemainingMs: max(0, h.UntilMs-now.UnixMilli()), StepID: h.StepId, SetAtMs: h.SetAtMs}
		}
		out = append(out, pj)
	}
	return out
}

// printProviders lists the providers with a limit, a hold or a running
// call; nothing when there are none.
func printProviders(w io.Writer, ps []*dexv1.ProviderStatus, now time.Time) {
	if len(ps) == 0 {
		return
	}
	fmt.Fprintln(w, "\nProviders (limits as the leader applies them; -: no limit):")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROVIDER\tMAX CONCURRENT\tCALLS/MIN\tTOKENS/MIN\tRUNNING\tTHROTTLED\tHOLD")
	for _, p := range ps {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\n", safe(p.Provider), limit(uint64(p.MaxConcurrent)), limit(uint64(p.CallsPerMinute)),
			limit(p.TokensPerMinute), p.Running, p.Throttled, holdText(p.Hold, now))
	}
	tw.Flush()
}

func limit(n uint64) string {
	if n == 0 {
		return "-"
	}
	return strconv.FormatUint(n, 10)
}

// holdText is a hold's remaining time, end and Step ("-": none).
func holdText(h *dexv1.ProviderHold, now time.Time) string {
	if h == nil {
		return "-"
	}
	until := time.UnixMilli(h.UntilMs)
	left := "passed"
	if d := until.Sub(now); d > 0 {
		left = d.Round(100*time.Millisecond).String() + " left"
	}
	return fmt.Sprintf("until %s (%s), set by step %s", until.UTC().Format(time.RFC3339), left, safe(h.StepId))
}
