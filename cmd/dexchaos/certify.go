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

	"github.com/dexhq/dex/api/client"
	"github.com/dexhq/dex/api/tlsconf"
	"github.com/dexhq/dex/chaos"
)

const certifyUsage = `usage: dexchaos certify [--tools FILE] [--columns LIST] [--row REGEXP] [--out DIR] [--junit FILE] [--bin DIR] -- COMMAND [ARG]...

Certifies your Worker against the crash matrix (docs/certify.md): starts a
fresh 3-node dexd cluster per cell, a scripted model behind the providers'
APIs, and your Worker from COMMAND, and runs the matrix rows your code
decides — the model call, each tool by its policy, an idle session — in the
Worker-kill, server-restart and takeover columns.

Your Worker gets DEX_ADDR, DEX_TOKEN (when the cluster has tokens),
DEX_WORKER_ID, DEX_LEDGER, DEX_HOLD, DEX_HOLD_ALL, OPENAI_BASE_URL,
ANTHROPIC_BASE_URL, OPENAI_API_KEY and ANTHROPIC_API_KEY; it must run on a Dex
Worker library (Go, Python or TypeScript), which reads DEX_LEDGER and
DEX_HOLD itself.

--tools names the tools to exercise, their policy and sample arguments:
  {"tools": [{"name": "send_invoice", "policy": "idempotent_write",
              "arguments": {"order_id": "A-1"}}]}
Without it, every tool your Worker registers is exercised with {}.

--cluster runs the cells on a test cluster you name instead (its token from
$DEX_TOKEN): Worker-kill cells only, and no other Worker may serve the model
or the tools meanwhile; your Worker must take DEX_WORKER_ID as its id.

Prints one line per cell, writes OUT/matrix.md and OUT/matrix.json (and
--junit FILE), and for each failed cell what to fix, the command that runs
it again and its logs. Exits 1 when a cell fails, 2 on bad usage.

Flags:
`

type certifyConfig struct {
	tools, row, out, junit, bin, tmp string
	cluster                          string
	tls                              tlsconf.Files
	columns                          listFlag
	parallel                         int
	keep, list                       bool
	command                          []string
}

func parseCertifyFlags(args []string, stderr io.Writer) (*certifyConfig, error) {
	c := &certifyConfig{}
	fs := flag.NewFlagSet("dexchaos certify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, certifyUsage); fs.PrintDefaults() }
	fs.StringVar(&c.tools, "tools", "", "the tools file (default: every tool the Worker registers)")
	fs.Var(&c.columns, "columns", "columns to run, comma separated (default "+strings.Join(chaos.CertifyColumns, ",")+")")
	fs.StringVar(&c.row, "row", "", `run only the rows matching this regexp ("Step | Moment")`)
	fs.StringVar(&c.out, "out", "certify-report", "report directory")
	fs.StringVar(&c.junit, "junit", "", "also write the report as JUnit XML to this file")
	fs.StringVar(&c.bin, "bin", "bin", "directory holding dexd")
	fs.StringVar(&c.tmp, "tmp", "", "directory for the cells' data dirs (default the system's)")
	fs.IntVar(&c.parallel, "parallel", 1, "cells run at once")
	fs.BoolVar(&c.keep, "keep-logs", false, "keep every cell's logs in OUT/logs (a failed cell's are always kept in OUT/failed)")
	fs.BoolVar(&c.list, "list", false, "print the cells and exit (needs --tools)")
	fs.StringVar(&c.cluster, "cluster", "", "run on this test cluster (dex:///a,b,c or host:port; token from $DEX_TOKEN) instead of a fresh one: Worker-kill cells only")
	fs.StringVar(&c.tls.Cert, "tls-cert", "", "with --cluster: client certificate (PEM) for a cluster with mutual TLS, with --tls-key and --tls-ca")
	fs.StringVar(&c.tls.Key, "tls-key", "", "the key of --tls-cert (PEM)")
	fs.StringVar(&c.tls.CA, "tls-ca", "", "the CA bundle (PEM) the nodes' certificates chain to")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	c.command = fs.Args()
	if len(c.command) == 0 && !c.list {
		return nil, errors.New("no Worker command: give it after --, e.g. dexchaos certify --tools tools.json -- python3 worker.py")
	}
	if c.list && c.tools == "" {
		return nil, errors.New("--list needs --tools")
	}
	if c.parallel < 1 {
		return nil, errors.New("--parallel must be at least 1")
	}
	if c.cluster != "" {
		if len(c.columns) == 0 {
			c.columns = listFlag{chaos.ColWorkerKill}
		}
		for _, col := range c.columns {
			if col != chaos.ColWorkerKill {
				return nil, fmt.Errorf("--cluster runs only the worker-kill column: certify does not own the test cluster's nodes to restart or kill them (asked for %s)", col)
			}
		}
	} else if c.tls != (tlsconf.Files{}) {
		return nil, errors.New("--tls-cert, --tls-key and --tls-ca go with --cluster: the cluster certify starts has no TLS")
	}
	return c, nil
}

func runCertify(args []string, stdout, stderr io.Writer) int {
	c, err := parseCertifyFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "dexchaos certify:", err)
		return 2
	}
	fail := func(code int, err error) int {
		fmt.Fprintln(stderr, "dexchaos certify:", err)
		return code
	}
	var tools []chaos.CertifyTool
	if c.tools != "" {
		if tools, err = chaos.LoadCertifyTools(c.tools); err != nil {
			return fail(2, err)
		}
	}
	// The cells are checked before anything starts; without a tools file
	// the rows are known once the Worker registered.
	probe := []chaos.CertifyTool{{Name: "probe", Policy: chaos.PolicyRead}}
	if tools != nil {
		probe = tools
	}
	cells, err := chaos.SelectCertifyCells(chaos.CertifyRows(probe), c.columns, c.row)
	if err != nil {
		return fail(2, err)
	}
	if c.list {
		for i, cell := range cells {
			fmt.Fprintf(stdout, "[%d/%d] %s | %s | %s\n", i+1, len(cells), cell.Column.Name, cell.Row.Step, cell.Row.Moment)
		}
		return 0
	}
	var tc *chaos.TestCluster
	if c.cluster != "" {
		store, err := tlsconf.Load(c.tls)
		if err != nil {
			return fail(2, err)
		}
		token := client.TokenFrom("")
		tc = &chaos.TestCluster{Target: c.cluster, Token: token, RunID: fmt.Sprintf("%x", time.Now().UnixNano()%(1<<32)),
			DialOptions: append(client.DialOptions(store), client.WithToken(token))}
	} else if err := ensureDexd(c.bin, stdout); err != nil {
		return fail(2, err)
	}
	wd, err := os.Getwd()
	if err != nil {
		return fail(2, err)
	}
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		return fail(2, err)
	}
	for _, d := range []string{"failed", "logs", "cells"} {
		_ = os.RemoveAll(filepath.Join(c.out, d))
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	o := chaos.MatrixOptions{BinDir: c.bin, Out: c.out, Progress: stdout, Parallel: c.parallel, TmpDir: c.tmp, KeepLogs: c.keep,
		UserWorker: &chaos.UserWorker{Command: c.command, Dir: wd}, TestCluster: tc}
	start := time.Now()
	if tc != nil {
		if err := chaos.CheckTestClusterFree(ctx, tc, tools); err != nil {
			return fail(1, err)
		}
	}
	if tools == nil {
		fmt.Fprintln(stdout, "dexchaos certify: no --tools; starting your Worker once to read the tools it registers")
		if tools, err = chaos.DiscoverTools(ctx, o); err != nil {
			return fail(1, err)
		}
		for _, t := range tools {
			fmt.Fprintf(stdout, "  %s: %s\n", t.Name, t.Policy)
		}
	}
	if tc != nil && c.tools == "" {
		if err := chaos.CheckTestClusterFree(ctx, tc, tools); err != nil {
			return fail(1, err)
		}
	}
	rows := chaos.CertifyRows(tools)
	if cells, err = chaos.SelectCertifyCells(rows, c.columns, c.row); err != nil {
		return fail(2, err)
	}
	fmt.Fprintf(stdout, "dexchaos certify: %d cells against %s\n", len(cells), strings.Join(c.command, " "))
	results := chaos.RunMatrix(ctx, o, cells)
	for i := range results {
		if results[i].Result == chaos.ResultFail {
			results[i].Reproduce = chaos.Reproduce(results[i], c.tools, c.command)
		}
	}
	rep := chaos.Report{Cells: results, Started: start, Wall: time.Since(start), Target: chaos.Balancer(), Rows: rows,
		Title: "Dex certification: " + strings.Join(c.command, " "),
		Intro: "Every cell is a real test: a fresh 3-node `dexd` cluster on loopback, the model scripted behind the providers' APIs, " +
			"and this Worker, brought to the row's moment through its library's holds, struck with the column's fault, recovered and " +
			"checked from the library's execution ledger and the session as the cluster reports it. Generated by `dexchaos certify`."}
	if err := chaos.WriteReport(c.out, rep); err != nil {
		return fail(1, fmt.Errorf("report: %w", err))
	}
	if c.junit != "" {
		if err := chaos.WriteJUnit(c.junit, "dexchaos certify", rep); err != nil {
			return fail(1, fmt.Errorf("junit: %w", err))
		}
	}
	s := rep.Summarize()
	for _, cs := range s.Columns {
		fmt.Fprintf(stdout, "%-15s %d/%d pass", cs.Column, cs.Pass, cs.Total)
		if cs.Fail > 0 {
			fmt.Fprintf(stdout, ", %d FAIL", cs.Fail)
		}
		fmt.Fprintln(stdout)
	}
	for _, r := range results {
		if r.Result != chaos.ResultFail {
			continue
		}
		fmt.Fprintf(stdout, "\nFAIL %s | %s | %s\n  %s\n  reproduce: %s\n", r.Column, r.Step, r.Moment, r.Reason, r.Reproduce)
		if r.Logs != "" {
			fmt.Fprintf(stdout, "  logs: %s\n", r.Logs)
		}
	}
	fmt.Fprintf(stdout, "wall time %s; report in %s\n", rep.Wall.Round(time.Second), filepath.Join(c.out, "matrix.md"))
	fmt.Fprintf(stdout, "certify: %d passed, %d failed, %d skipped\n", s.Pass, s.Fail, s.NA)
	if s.Fail > 0 || ctx.Err() != nil {
		return 1
	}
	return 0
}

// ensureDexd builds dexd into bin when it is missing and dexchaos runs
// inside the Dex module.
func ensureDexd(bin string, stdout io.Writer) error {
	if _, err := os.Stat(filepath.Join(bin, "dexd")); err == nil {
		return nil
	}
	if _, err := os.Stat("go.mod"); err != nil {
		return fmt.Errorf("%s has no dexd: build it (go build -o %s/ ./cmd/dexd in a Dex checkout) or give --bin", bin, bin)
	}
	fmt.Fprintf(stdout, "dexchaos certify: building ./cmd/dexd into %s\n", bin)
	out, err := exec.Command("go", "build", "-o", strings.TrimSuffix(bin, "/")+"/", "./cmd/dexd").CombinedOutput()
	if err != nil {
		return fmt.Errorf("go build: %v: %s", err, out)
	}
	return nil
}
