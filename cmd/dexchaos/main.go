// Command dexchaos runs Dex's crash matrix (docs/crash-matrix.md) with real dexd and
// dexworker processes and writes its report.
//
//	dexchaos matrix --out DIR [--column NAME]... [--row PATTERN] [--bin DIR] [--parallel N] [--partitions N]
//	dexchaos matrix --list [--column NAME]... [--row PATTERN]
//	dexchaos takeover [--kills N] [--target dex|haproxy|both] [--bin DIR]
//	dexchaos soak --duration D --seed S [--out DIR] [--bin DIR]
//	dexchaos provider --script FILE [--addr 127.0.0.1:0] [--log FILE]
//	dexchaos certify [--tools FILE] [--columns LIST] [--out DIR] [--junit FILE] -- COMMAND [ARG]...
//	dexchaos restore-time --data-dir DIR
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/dexhq/dex/chaos"
	"github.com/dexhq/dex/chaos/harness"
)

const usage = `usage: dexchaos matrix --out DIR [--column NAME] [--row PATTERN] [--bin DIR] [--worker LANG] [--adapter NAME] [--partitions N]
       dexchaos matrix --list [--column NAME] [--row PATTERN]
       dexchaos takeover [--kills N] [--target dex|haproxy|both] [--bin DIR]
       dexchaos soak --duration D --seed S [--out DIR] [--bin DIR]
       dexchaos provider --script FILE [--addr 127.0.0.1:0] [--log FILE]
       dexchaos certify [--tools FILE] [--columns LIST] [--out DIR] [--junit FILE] -- COMMAND [ARG]...
       dexchaos restore-time --data-dir DIR

Runs every cell of the crash matrix (docs/crash-matrix.md): each row's moment against each
column's fault, on a fresh 3-node dexd cluster with dexworker processes,
and writes DIR/matrix.md and DIR/matrix.json. Prints one line per cell as
it runs; exits 1 when a cell fails, 2 on bad usage.

takeover measures leader SIGKILLs (dexchaos takeover --help).
soak runs a seeded random fault schedule under load and checks the run
(dexchaos soak --help).
provider serves a scripted model behind the providers' HTTP APIs
(dexchaos provider --help).
certify runs the matrix against your own Worker (dexchaos certify --help).
restore-time times a restore of a node's newest snapshot, as the soak's
flatness figures do (dexchaos restore-time --help).

Columns: worker-kill, server-restart, takeover, leader-pause, takeover-dex.
--row matches the regular expression against "Step | Moment".
--bin holds dexd and dexworker; a dexd built with -tags chaos in BIN/chaos
runs the failpoint cells (without it they are n/a).
--worker go|python|typescript runs that library's demo Worker (BIN/dexworker,
BIN/dexworker-python, BIN/dexworker-typescript: make build writes them).
--adapter ai-sdk|openai-agents|claude-agent-sdk (with --worker typescript)
drives the demo Worker's scripted model through that framework adapter.
--partitions N runs every cell on clusters of N partitions (dexd --partitions
N): a cell's sessions live in one partition, the faults strike its leader,
and the takeover columns keep sessions of the other partitions running.

Flags:
`

type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error {
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*l = append(*l, p)
		}
	}
	return nil
}

type config struct {
	out, row, bin, tmp string
	worker, adapter    string
	columns            listFlag
	list, keep         bool
	parallel           int
	partitions         int
}

func parseFlags(args []string, stderr io.Writer) (*config, error) {
	if len(args) == 0 || args[0] != "matrix" {
		fmt.Fprint(stderr, usage)
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			return nil, flag.ErrHelp
		}
		return nil, errors.New("the command is: dexchaos matrix, takeover, soak, provider, certify or restore-time")
	}
	c := &config{}
	fs := flag.NewFlagSet("dexchaos matrix", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	fs.StringVar(&c.out, "out", "", "report directory (required unless --list)")
	fs.Var(&c.columns, "column", "run only this column (repeat or comma-separate)")
	fs.StringVar(&c.row, "row", "", `run only the rows matching this regexp ("Step | Moment")`)
	fs.StringVar(&c.bin, "bin", "bin", "directory holding dexd and dexworker (and chaos/dexd)")
	fs.BoolVar(&c.list, "list", false, "print the cells and exit")
	fs.IntVar(&c.parallel, "parallel", 1, "cells run at once")
	fs.IntVar(&c.partitions, "partitions", 1, "partitions of every cell's cluster (dexd --partitions)")
	fs.BoolVar(&c.keep, "keep-logs", false, "keep every cell's logs in OUT/logs (a failed cell's are always kept in OUT/failed)")
	fs.StringVar(&c.tmp, "tmp", "", "directory for the cells' data dirs (default the system's)")
	fs.StringVar(&c.worker, "worker", "go", "the demo Worker's library: "+strings.Join(harness.WorkerLanguages, ", "))
	fs.StringVar(&c.adapter, "adapter", "", "with --worker typescript, drive the scripted model through this framework adapter: "+strings.Join(harness.WorkerAdapters, ", "))
	if err := fs.Parse(args[1:]); err != nil {
		return nil, err
	}
	if err := harness.CheckWorkerLanguage(c.worker); err != nil {
		return nil, err
	}
	if err := harness.CheckWorkerAdapter(c.worker, c.adapter); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if !c.list && c.out == "" {
		return nil, errors.New("--out is required")
	}
	if c.parallel < 1 {
		return nil, errors.New("--parallel must be at least 1")
	}
	if c.partitions < 1 {
		return nil, errors.New("--partitions must be at least 1")
	}
	return c, nil
}

// ensureBinaries builds what --bin lacks when dexchaos runs inside the Dex
// module (a clean checkout), so `dexchaos matrix` works without make.
func ensureBinaries(bin string, stdout io.Writer) error {
	var missing []string
	for _, b := range []string{"dexd", "dexworker"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			missing = append(missing, "./cmd/"+b)
		}
	}
	_, chaosErr := harness.ChaosDexd(bin)
	if len(missing) == 0 && chaosErr == nil {
		return nil
	}
	if _, err := os.Stat("go.mod"); err != nil {
		if len(missing) > 0 {
			return fmt.Errorf("%s has no %s", bin, strings.Join(missing, ", "))
		}
		return nil // the failpoint cells will say n/a
	}
	if len(missing) > 0 {
		fmt.Fprintf(stdout, "dexchaos: building %s into %s\n", strings.Join(missing, " "), bin)
		build := exec.Command("go", append([]string{"build", "-o", strings.TrimSuffix(bin, "/") + "/"}, missing...)...)
		if out, err := build.CombinedOutput(); err != nil {
			return fmt.Errorf("go build: %v: %s", err, out)
		}
	}
	if chaosErr != nil {
		fmt.Fprintf(stdout, "dexchaos: building the failpoint build of dexd into %s\n", filepath.Join(bin, "chaos"))
		return harness.BuildChaos(filepath.Join(bin, "chaos"))
	}
	return nil
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "takeover" {
		return runTakeover(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "soak" {
		return runSoak(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "provider" {
		return runProviderUntilSignal(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "certify" {
		return runCertify(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "restore-time" {
		return runRestoreTime(args[1:], stdout, stderr)
	}
	c, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "dexchaos:", err)
		return 2
	}
	cells, err := chaos.SelectCells(c.columns, c.row)
	if err != nil {
		fmt.Fprintln(stderr, "dexchaos:", err)
		return 2
	}
	if c.list {
		for i, cell := range cells {
			fmt.Fprintf(stdout, "[%d/%d] %s | %s | %s\n", i+1, len(cells), cell.Column.Name, cell.Row.Step, cell.Row.Moment)
		}
		return 0
	}
	if err := ensureBinaries(c.bin, stdout); err != nil {
		fmt.Fprintf(stderr, "dexchaos: %v (build them: make build, then go build -tags chaos -o %s/chaos/ ./cmd/dexd)\n", err, c.bin)
		return 2
	}
	if err := harness.CheckWorkerBinary(c.bin, c.worker); err != nil {
		fmt.Fprintln(stderr, "dexchaos:", err)
		return 2
	}
	if _, err := harness.ChaosDexd(c.bin); err != nil {
		fmt.Fprintf(stderr, "dexchaos: no chaos build of dexd, the failpoint cells are n/a: %v\n", err)
	}
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		fmt.Fprintln(stderr, "dexchaos:", err)
		return 2
	}
	// A failed cell's logs from an earlier run would mislead.
	for _, d := range []string{"failed", "logs", "cells"} {
		_ = os.RemoveAll(filepath.Join(c.out, d))
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(stdout, "dexchaos: %d cells, %s Workers, their target: %s\n", len(cells), c.worker, chaos.Balancer())
	if c.partitions > 1 {
		fmt.Fprintf(stdout, "dexchaos: every cluster runs %d partitions\n", c.partitions)
	}
	start := time.Now()
	results := chaos.RunMatrix(ctx, chaos.MatrixOptions{
		BinDir: c.bin, Out: c.out, Progress: stdout, Parallel: c.parallel, TmpDir: c.tmp, KeepLogs: c.keep,
		Worker: c.worker, Adapter: c.adapter, Partitions: c.partitions,
	}, cells)
	rep := chaos.Report{Cells: results, Started: start, Wall: time.Since(start), Target: chaos.Balancer(), Worker: c.worker, Adapter: c.adapter, Partitions: c.partitions}
	if err := chaos.WriteReport(c.out, rep); err != nil {
		fmt.Fprintln(stderr, "dexchaos: report:", err)
		return 1
	}
	s := rep.Summarize()
	for _, cs := range s.Columns {
		fmt.Fprintf(stdout, "%-15s %d/%d pass", cs.Column, cs.Pass, cs.Total)
		if cs.NA > 0 {
			fmt.Fprintf(stdout, ", %d n/a", cs.NA)
		}
		if cs.Fail > 0 {
			fmt.Fprintf(stdout, ", %d FAIL", cs.Fail)
		}
		fmt.Fprintln(stdout)
	}
	if s.Takeovers > 0 {
		fmt.Fprintf(stdout, "takeover time: median %.2fs, max %.2fs over %d takeovers\n", s.TakeoverMedianSeconds, s.TakeoverMaxSeconds, s.Takeovers)
	}
	fmt.Fprintf(stdout, "wall time %s; report in %s\n", rep.Wall.Round(time.Second), filepath.Join(c.out, "matrix.md"))
	// The closing count in the usual form; an n/a cell counts as skipped.
	fmt.Fprintf(stdout, "matrix: %d passed, %d failed, %d skipped\n", s.Pass, s.Fail, s.NA)
	if s.Fail > 0 || ctx.Err() != nil {
		fmt.Fprintf(stdout, "%d cells FAILED\n", s.Fail)
		return 1
	}
	return 0
}
