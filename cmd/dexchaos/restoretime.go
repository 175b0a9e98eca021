package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/dexhq/dex/chaos/soak"
)

const restoreTimeUsage = `usage: dexchaos restore-time --data-dir DIR

Restores the newest raft snapshot of a node's data dir offline, once, into
a fresh state machine in this process, and prints its size, raft index and
restore time as one JSON object. The node may be running: its snapshot
files are only read. The soak's flatness figures time their restores this
way, in a process of their own, as a node's start does.

Flags:
`

// restoreTimeCmd is how the soak runs restore-time: this executable.
func restoreTimeCmd() ([]string, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this executable to time restores with: %w", err)
	}
	return []string{exe, "restore-time"}, nil
}

func runRestoreTime(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("dexchaos restore-time", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, restoreTimeUsage)
		fs.PrintDefaults()
	}
	dataDir := fs.String("data-dir", "", "a node's data directory")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "dexchaos restore-time: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *dataDir == "" {
		fmt.Fprintln(stderr, "dexchaos restore-time: --data-dir is required")
		return 2
	}
	t, err := soak.RestoreOnce(*dataDir)
	if err != nil {
		fmt.Fprintln(stderr, "dexchaos restore-time:", err)
		return 1
	}
	if err := json.NewEncoder(stdout).Encode(t); err != nil {
		fmt.Fprintln(stderr, "dexchaos restore-time:", err)
		return 1
	}
	return 0
}
