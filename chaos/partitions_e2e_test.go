//go:build e2e

package chaos

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dexhq/dex/chaos/harness"
)

// The harness finds each partition's leader of a cluster of 3 partitions
// through Status: the balancer gives each node one, WaitReady returns
// partition 0's, and a partition whose leader is killed gets another.
func TestPartitionedCluster_HarnessFindsEachPartitionsLeader(t *testing.T) {
	c, err := harness.NewCluster(harness.ClusterOptions{BinDir: binDir, Dir: t.TempDir(), Args: fastArgs, Partitions: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.KillAll)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l1, err := c.WaitSpread(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	leaders := map[string]bool{}
	for k := range 3 {
		l, err := c.PartitionLeader(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		leaders[l.ID] = true
		if k == 1 && l != l1 {
			t.Fatalf("WaitSpread says %s leads partition 1, PartitionLeader %s", l1.ID, l.ID)
		}
	}
	if len(leaders) != 3 {
		t.Fatalf("spread leaders: %v; want one partition each", leaders)
	}
	l0, err := c.WaitReady(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if l, _ := c.PartitionLeader(ctx, 0); l != l0 {
		t.Fatalf("WaitReady returned %s; partition 0 is led by %v", l0.ID, l)
	}
	l1.Kill()
	next, err := c.WaitPartitions(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if next == l1 || !next.Running() {
		t.Fatalf("partition 1 is led by %s after its leader %s was killed", next.ID, l1.ID)
	}
}

// A takeover cell on clusters of 3 partitions strikes the leader of the
// cell's partition while background sessions of the others run, and
// passes.
func TestMatrix_PartitionedTakeoverCell(t *testing.T) {
	cells, err := SelectCells([]string{ColTakeover}, "CallTool, read")
	if err != nil || len(cells) != 1 {
		t.Fatal(cells, err)
	}
	out := t.TempDir()
	var progress bytes.Buffer
	res := RunMatrix(context.Background(), MatrixOptions{BinDir: plainBin(t), Out: out, Progress: &progress, Partitions: 3}, cells)
	if res[0].Result != ResultPass || len(res[0].Takeovers) != 1 {
		t.Fatalf("%+v\n%s", res[0], progress.String())
	}
	notes, err := os.ReadFile(filepath.Join(out, "cells", slug(cells[0].Name())+".txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"the cell's sessions live in partition", "background sessions running in partitions", "the leader of partition", "rejoined"} {
		if !strings.Contains(string(notes), want) {
			t.Fatalf("the cell's notes lack %q:\n%s", want, notes)
		}
	}
}
