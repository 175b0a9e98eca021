package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"syscall"

	"github.com/dexhq/dex/chaos"
	"github.com/dexhq/dex/chaos/harness"
)

const takeoverUsage = `usage: dexchaos takeover [--kills N] [--target dex|haproxy|both] [--bin DIR]

Measures takeovers as a user gets them: 3 dexd with their default flags and
one dexworker on 127.0.0.1, then N times: a session runs to idle, the leader
gets SIGKILL, a session is created at once through the target; it prints
kill → a node's /readyz 200 and kill → that session idle, restarts the
killed node on its data dir and waits until it caught up. Each target gets
its own cluster. At the end, per target: median / p99 / max of both figures,
the repeated model calls read from the Worker's ledger, and how busy the
machine was. Exits 1 when a measurement fails, 2 on bad usage.

Flags:
`

type takeoverConfig struct {
	kills          int
	target         string
	bin, tmp       string
	keep           bool
	partitions     int
	targetsToMeter []string
}

func parseTakeoverFlags(args []string, stderr io.Writer) (*takeoverConfig, error) {
	c := &takeoverConfig{}
	fs := flag.NewFlagSet("dexchaos takeover", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, takeoverUsage)
		fs.PrintDefaults()
	}
	fs.IntVar(&c.kills, "kills", 20, "leader SIGKILLs per target")
	fs.StringVar(&c.target, "target", "both", "dex (the Go library's dex:/// target), haproxy (deploy/haproxy/haproxy.cfg) or both")
	fs.StringVar(&c.bin, "bin", "bin", "directory holding dexd and dexworker")
	fs.StringVar(&c.tmp, "tmp", "", "directory for the data dirs and logs (default the system's)")
	fs.BoolVar(&c.keep, "keep-logs", false, "keep the data dirs and logs (they are always kept when a measurement fails)")
	fs.IntVar(&c.partitions, "partitions", 1, "run the cluster with dexd --partitions N: kill k SIGKILLs the leader of partition k mod N while the other partitions' sessions run, and their turns before and during each takeover are timed (target dex only)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if c.kills < 1 {
		return nil, errors.New("--kills must be at least 1")
	}
	if c.partitions < 1 || c.partitions > 64 {
		return nil, errors.New("--partitions must be between 1 and 64")
	}
	if c.partitions > 1 && c.target != chaos.TargetDex {
		return nil, errors.New("--partitions: give --target dex (HAProxy is measured on a cluster of one partition)")
	}
	switch c.target {
	case chaos.TargetDex, chaos.TargetHAProxy:
		c.targetsToMeter = []string{c.target}
	case "both":
		c.targetsToMeter = []string{chaos.TargetDex, chaos.TargetHAProxy}
	default:
		return nil, fmt.Errorf("--target %q: dex, haproxy or both", c.target)
	}
	return c, nil
}

func runTakeover(args []string, stdout, stderr io.Writer) int {
	c, err := parseTakeoverFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "dexchaos takeover:", err)
		return 2
	}
	for _, b := range []string{"dexd", "dexworker"} {
		if _, err := os.Stat(filepath.Join(c.bin, b)); err != nil {
			fmt.Fprintf(stderr, "dexchaos takeover: %s has no %s (build it: make build)\n", c.bin, b)
			return 2
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var results []*chaos.TakeoverResult
	failed := false
	for _, target := range c.targetsToMeter {
		if target == chaos.TargetHAProxy && !harness.HAProxyAvailable() {
			fmt.Fprintln(stdout, "haproxy is not installed: the haproxy target is skipped")
			continue
		}
		if ctx.Err() != nil {
			break
		}
		fmt.Fprintf(stdout, "%s: %d leader SIGKILLs, default dexd flags\n", target, c.kills)
		cpu, cpuOK := chaos.SampleCPU()
		res, err := chaos.RunTakeover(ctx, chaos.TakeoverOptions{
			BinDir: c.bin, TmpDir: c.tmp, Target: target, Kills: c.kills, Progress: stdout, KeepDir: c.keep, Partitions: c.partitions,
		})
		if cpuOK {
			fmt.Fprintf(stdout, "%-7s %s\n", target, chaos.BusySince(cpu, runtime.NumCPU()))
		}
		if err != nil {
			fmt.Fprintf(stderr, "dexchaos takeover: %s: %v\n", target, err)
			failed = true
		}
		if res != nil && len(res.Kills) > 0 {
			results = append(results, res)
		}
		if res != nil && res.Dir != "" && err == nil {
			fmt.Fprintf(stdout, "%-7s logs kept in %s\n", target, res.Dir)
		}
	}
	for _, r := range results {
		for _, line := range r.Summary() {
			fmt.Fprintln(stdout, line)
		}
	}
	if failed || ctx.Err() != nil {
		return 1
	}
	return 0
}
