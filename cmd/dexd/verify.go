package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/dexhq/dex/cluster"
)

// runVerify is `dexd verify --data-dir DIR`: it checks a stopped node's store
// offline (bolt file, every log entry's checksum, every snapshot's CRC64),
// prints what it checked and the verdict, and exits 0 when the store is
// intact, 1 when it is damaged (or cannot be checked), 2 on bad flags. A
// full disk (where the WAL is copied to be read) is no verdict on the store.
func runVerify(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("dexd verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dataDir := fs.String("data-dir", "", "data directory of a stopped node")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "dexd verify: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *dataDir == "" {
		fmt.Fprintln(stderr, "dexd verify: --data-dir is required")
		return 2
	}
	checked, err := cluster.VerifyDataDir(*dataDir)
	for _, line := range checked {
		fmt.Fprintf(stdout, "ok       %s\n", line)
	}
	if err != nil && cluster.IsDiskFull(err) {
		fmt.Fprintf(stdout, "UNCHECKED %s\n", oneLine(err.Error()))
		fmt.Fprintf(stdout, "verdict: not checked: %s, where the WAL is copied to be read, is full; free space there (or point TMPDIR elsewhere) and run again\n", os.TempDir())
		return 1
	}
	if err != nil {
		fmt.Fprintf(stdout, "DAMAGED  %s\n", oneLine(err.Error()))
		return 1
	}
	fmt.Fprintf(stdout, "verdict: the store in %s is intact\n", *dataDir)
	return 0
}
