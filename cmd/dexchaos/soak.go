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
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/dexhq/dex/api/server"
	"github.com/dexhq/dex/chaos/soak"
)

// minSoakPayload: the big load leaves 16 KiB of each request for what it
// carries beside its payload; below this little would be left.
const minSoakPayload = 64 << 10

const soakUsage = `usage: dexchaos soak --duration D --seed S [--big] [--retention D [--archive]] [--partitions N] [--out DIR] [--bin DIR] [--faults KIND,...]

Runs 3 dexd and a few dexworkers (scripted models: every tool policy,
approvals, questions, timers, polled tools, failing attempts, model
errors, compaction) under a steady mixed load from several clients, while
faults drawn from the seed strike at random moments: SIGKILL of one node,
of the leader, of two nodes, of every node (restarted on their data dirs),
SIGSTOP of the leader or a follower, Worker kills, pauses and
disconnects (the process running, its connections cut), leadership
transfers, and with the chaos build of dexd partitions (isolate-leader,
isolate-follower, one-way, slow-link) and a slow disk on one node.
The same seed draws the same faults. Then every fault is healed, the
cluster quiesces and the checker judges the run: acknowledged writes
present, executions within each tool's policy and each Step's attempts,
calls told once, every node's state identical, the clients' history
linearizable. The nodes snapshot often; a few backups are taken while the
load runs and one at the end. After the check every node is stopped,
every snapshot it keeps is restored offline, and all start again on their
data dirs and must catch up and serve the final state; every backup is
inspected and restored into a 1-node scratch cluster that must serve the
backup's sessions, also after its own restart. A failure of either is a
violation.

--big adds one more client that makes 10 sessions at the payload limits,
spread over the run: messages and question answers of the cluster's
message limit (a quarter of --max-payload), and model outputs, a tool
call's arguments and its result, 100 tool calls' arguments and model
error texts near --max-payload.

--retention D is the lifecycle mode: the nodes run with --retention D
(closed sessions are deleted D after they close) and the clients close
sessions throughout, so the number of live sessions stays about
constant. A client that sees a session it closed closed exports it
through the API (as dexctl session export does). The checker accepts a
session gone only once its close was asked for and D passed since it
closed. --archive adds --archive-url (a directory in the soak's data
dir): every session deleted, or closed more than D before the final
reads, must be in the archive, byte-identical to its export. Every
minute and at the end the leader's newest snapshot size, its RSS and
the time to restore that snapshot offline are sampled; a run of 30
minutes or more is judged flat when every sample of its last 15 minutes
is within 10 % of minute 15's (exit 1 when not).

--partitions N runs the cluster with dexd --partitions N: each fault
that strikes the leader strikes the leader of one partition, drawn from
the seed; node states, snapshots and catch-up are checked partition by
partition; backups hold and restore every partition (into scratch
clusters of N partitions); every backup's partitions must hold the same
tool catalog and Worker registrations; the report gives each
partition's figures. The flatness figures are partition 0's.

Writes DIR/soak.md, DIR/soak.json and DIR/history.jsonl (and the logs and
linearizability.html of a failing run). Exits 1 on a violation, 2 on bad
usage.

Flags:
`

type soakConfig struct {
	duration         time.Duration
	seed             uint64
	out, bin, tmp    string
	clients, workers int
	faults           listFlag
	big              bool
	maxPayload       int
	retention        time.Duration
	archive          bool
	sampleEvery      time.Duration
	partitions       int
}

func parseSoakFlags(args []string, stderr io.Writer) (*soakConfig, error) {
	c := &soakConfig{}
	fs := flag.NewFlagSet("dexchaos soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, soakUsage)
		fs.PrintDefaults()
	}
	fs.DurationVar(&c.duration, "duration", 3*time.Minute, "how long the load and the faults run (the check comes after)")
	fs.Uint64Var(&c.seed, "seed", 1, "the seed of the fault schedule")
	fs.StringVar(&c.out, "out", "soak-report", "report directory")
	fs.StringVar(&c.bin, "bin", "bin", "directory holding dexd and dexworker (and chaos/dexd)")
	fs.StringVar(&c.tmp, "tmp", "", "directory for the data dirs and logs (default the system's)")
	fs.IntVar(&c.clients, "clients", 4, "client goroutines")
	fs.IntVar(&c.workers, "workers", 3, "dexworker processes")
	fs.Var(&c.faults, "faults", "draw only these fault kinds (comma-separated; default all the harness can do)")
	fs.BoolVar(&c.big, "big", false, "add sessions whose messages, answers, model outputs, tool results, tool-call arguments and model errors are at the payload limits")
	fs.IntVar(&c.maxPayload, "max-payload", server.DefaultMaxPayload, "the nodes' --max-payload; the limits --big aims at follow from it")
	fs.DurationVar(&c.retention, "retention", 0, "lifecycle mode: the nodes' --retention; the clients close sessions throughout (0: sessions are never closed)")
	fs.BoolVar(&c.archive, "archive", false, "with --retention: the nodes archive every session before they delete it, and the check compares the archive with the sessions' exports")
	fs.DurationVar(&c.sampleEvery, "sample-every", time.Minute, "with --retention: how often the flatness figures are sampled")
	fs.IntVar(&c.partitions, "partitions", 1, "run the cluster with dexd --partitions N (raft groups, each with its own leader)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if c.duration < 10*time.Second {
		return nil, errors.New("--duration must be at least 10s")
	}
	if c.clients < 1 || c.workers < 1 {
		return nil, errors.New("--clients and --workers must be at least 1")
	}
	if c.retention < 0 {
		return nil, errors.New("--retention must not be negative")
	}
	if c.archive && c.retention == 0 {
		return nil, errors.New("--archive needs --retention")
	}
	if c.sampleEvery < time.Second {
		return nil, errors.New("--sample-every must be at least 1s")
	}
	if c.partitions < 1 {
		return nil, errors.New("--partitions must be at least 1")
	}
	if c.maxPayload < minSoakPayload {
		return nil, fmt.Errorf("--max-payload must be at least %d", minSoakPayload)
	}
	known := append(append(append([]string(nil), soak.NodeFaults...), soak.NetFaults...), soak.FailpointFaults...)
	for _, f := range c.faults {
		if !slices.Contains(known, f) {
			return nil, fmt.Errorf("unknown fault kind %q (known: %s)", f, strings.Join(known, ", "))
		}
	}
	return c, nil
}

func runSoak(args []string, stdout, stderr io.Writer) int {
	c, err := parseSoakFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "dexchaos soak:", err)
		return 2
	}
	if err := ensureBinaries(c.bin, stdout); err != nil {
		fmt.Fprintf(stderr, "dexchaos soak: %v (build them: make build)\n", err)
		return 2
	}
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		fmt.Fprintln(stderr, "dexchaos soak:", err)
		return 2
	}
	for _, stale := range []string{"logs", "linearizability.html"} {
		_ = os.RemoveAll(filepath.Join(c.out, stale))
	}
	restoreCmd, err := restoreTimeCmd()
	if err != nil {
		fmt.Fprintln(stderr, "dexchaos soak:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	rep, err := soak.Run(ctx, soak.Options{
		BinDir: c.bin, Out: c.out, TmpDir: c.tmp, Duration: c.duration, Seed: c.seed,
		Clients: c.clients, Workers: c.workers, Progress: stdout, Kinds: c.faults,
		Big: c.big, MaxPayload: c.maxPayload,
		Retention: c.retention, Archive: c.archive, SampleEvery: c.sampleEvery,
		RestoreTimer: soak.ChildRestoreTimer(restoreCmd, soak.RestoreTries),
		Partitions:   c.partitions,
	})
	if rep != nil {
		if werr := soak.WriteReport(c.out, rep); werr != nil {
			fmt.Fprintln(stderr, "dexchaos soak: report:", werr)
		}
		fmt.Fprint(stdout, rep.Summary())
		for _, v := range rep.Check.Violations {
			fmt.Fprintf(stdout, "VIOLATION %s %s: %s\n", v.Kind, v.Session, v.Detail)
		}
		fmt.Fprintf(stdout, "report in %s\n", filepath.Join(c.out, "soak.md"))
	}
	if err != nil {
		fmt.Fprintln(stderr, "dexchaos soak:", err)
		return 1
	}
	if len(rep.Check.Violations) > 0 || rep.NotFlat() || ctx.Err() != nil {
		return 1
	}
	return 0
}
