package client

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

func savingTool() Tool {
	return writeTool("save_note", func(context.Context, ToolCall) (ToolResult, error) { return ToolResult{Content: "saved"}, nil })
}

func noteTask(step string) *dexv1.Task {
	return toolTask(step, "save_note", dexv1.ToolAccess_TOOL_ACCESS_IDEMPOTENT_WRITE)
}

// polledPartitions is the set of partitions polls named, from the i-th on.
func polledPartitions(f *fakeWorkers, i int) []string {
	return slices.Sorted(maps.Keys(countPolls(f.polls[i:])))
}

func countPolls(polls []string) map[string]int {
	n := map[string]int{}
	for _, p := range polls {
		n[p]++
	}
	return n
}

// One partition (0 or 1) polls as ever, naming none; several get a poll
// loop each, every poll naming its partition, and run the tasks of each.
// With the default concurrency (4) every partition has a poll out at once:
// no loop takes all the slots for its own poll.
func TestWorkerPollMetadataNamesEachPartition(t *testing.T) {
	for _, tc := range []struct {
		partitions uint32
		want       []string
	}{
		{0, []string{""}},
		{1, []string{""}},
		{3, []string{"0", "1", "2"}},
	} {
		t.Run(fmt.Sprint(tc.partitions), func(t *testing.T) {
			f := newFakeWorkers()
			f.partitions = tc.partitions
			for _, part := range tc.want {
				task := noteTask("in-" + part)
				if part == "" {
					f.tasks = append(f.tasks, task)
				} else {
					f.byPartition[part] = append(f.byPartition[part], task)
				}
			}
			nodes := startWorkerNodes(t, f, 1)
			runWorker(t, nodes, WorkerOptions{Tools: []Tool{savingTool()}})
			f.waitFor(t, "every task completed, a few more polls and every partition polled at once", func() bool {
				return len(f.completes) == len(tc.want) && len(f.polls) >= 3*len(tc.want) && f.mostPollsOut >= len(tc.want)
			})
			f.mu.Lock()
			defer f.mu.Unlock()
			if got := polledPartitions(f, 0); !slices.Equal(got, tc.want) {
				t.Fatalf("polls named partitions %q, want %q", got, tc.want)
			}
			if len(f.doubled) > 0 {
				t.Fatalf("two polls of one partition at once: %v", f.doubled)
			}
		})
	}
}

// The loops of three partitions share the Worker's task slots: the fake
// counts, at each poll, the tasks out and the tasks asked for.
func TestWorkerPollsEveryPartitionWithinConcurrency(t *testing.T) {
	const concurrency = 2
	f := newFakeWorkers()
	f.partitions, f.concurrency = 3, concurrency
	var steps []string
	for _, part := range []string{"0", "1", "2"} {
		for i := range 3 {
			step := fmt.Sprintf("p%s-%d", part, i)
			steps = append(steps, step)
			f.byPartition[part] = append(f.byPartition[part], noteTask(step))
		}
	}
	nodes := startWorkerNodes(t, f, 1)
	var mu sync.Mutex
	running, most := 0, 0
	runWorker(t, nodes, WorkerOptions{Concurrency: concurrency, Tools: []Tool{writeTool("save_note", func(context.Context, ToolCall) (ToolResult, error) {
		mu.Lock()
		running++
		most = max(most, running)
		mu.Unlock()
		time.Sleep(10 * time.Millisecond) // lets tasks of several partitions overlap
		mu.Lock()
		running--
		mu.Unlock()
		return ToolResult{Content: "saved"}, nil
	})}})
	f.waitFor(t, "every task completed", func() bool { return len(f.completes) == len(steps) })
	f.mu.Lock()
	defer f.mu.Unlock()
	var done []string
	for _, c := range f.completes {
		done = append(done, c.Ref.StepId)
	}
	slices.Sort(done)
	if !slices.Equal(done, steps) {
		t.Fatalf("completed %v, want %v", done, steps)
	}
	if got, want := polledPartitions(f, 0), []string{"0", "1", "2"}; !slices.Equal(got, want) {
		t.Fatalf("polls named partitions %q, want %q", got, want)
	}
	if len(f.overbooked) > 0 {
		t.Fatalf("more than %d task slots taken: %v", concurrency, f.overbooked)
	}
	mu.Lock()
	defer mu.Unlock()
	if most > concurrency {
		t.Fatalf("%d tasks ran at once, concurrency %d", most, concurrency)
	}
}

// With fewer task slots than partitions a poll holds the only slot while
// it waits, so the loops poll briefly in turn: a task of any partition is
// handed out while the others are idle, and no poll waits a whole
// PollWait.
func TestWorkerWithFewerSlotsThanPartitionsPollsInTurn(t *testing.T) {
	f := newFakeWorkers()
	f.partitions, f.concurrency = 3, 1
	f.byPartition["2"] = append(f.byPartition["2"], noteTask("p2-0"))
	nodes := startWorkerNodes(t, f, 1)
	runWorker(t, nodes, WorkerOptions{Concurrency: 1, PollWait: time.Minute, Tools: []Tool{savingTool()}})
	f.waitFor(t, "partition 2's task completed", func() bool { return len(f.completes) == 1 })
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.longestWait > uint32(sharedSlotWait.Milliseconds()) {
		t.Fatalf("a poll waited up to %d ms with 1 slot for 3 partitions, want at most %s", f.longestWait, sharedSlotWait)
	}
}

// A registration that reports a new partition count is followed: from one
// partition to three (new loops start), then back to one (they stop, and
// partition 0's loop names no partition again).
func TestWorkerFollowsAChangedPartitionCount(t *testing.T) {
	f := newFakeWorkers()
	f.partitions = 1
	nodes := startWorkerNodes(t, f, 1)
	runWorker(t, nodes, WorkerOptions{Tools: []Tool{savingTool()}})
	f.waitFor(t, "a poll naming no partition", func() bool { return slices.Contains(f.polls, "") })

	f.mu.Lock()
	f.partitions, f.unknownPolls = 3, 1 // the refused poll makes the Worker register again
	f.byPartition["2"] = []*dexv1.Task{noteTask("in-2")}
	grown := len(f.polls)
	f.mu.Unlock()
	f.waitFor(t, "partition 2's task completed and polls of partitions 0 and 1", func() bool {
		n := countPolls(f.polls[grown:])
		return len(f.completes) == 1 && n["0"] > 0 && n["1"] > 0
	})

	f.mu.Lock()
	f.partitions, f.unknownPolls = 1, 1
	f.tasks = []*dexv1.Task{noteTask("after")}
	shrunk := len(f.polls)
	f.mu.Unlock()
	// Loop 0 polls a few times more: loops 1 and 2 would poll as often.
	f.waitFor(t, "the unpartitioned task completed and more polls naming none", func() bool {
		return len(f.completes) == 2 && countPolls(f.polls[shrunk:])[""] >= 5
	})
	f.mu.Lock()
	defer f.mu.Unlock()
	// Each stopped loop may still have had one poll on its way when the
	// first poll naming none came.
	first := shrunk + slices.Index(f.polls[shrunk:], "")
	late := countPolls(f.polls[first:])
	if late["1"] > 1 || late["2"] > 1 {
		t.Fatalf("partitions 1 and 2 still polled after shrinking to one: %v", f.polls[first:])
	}
	// A loop left running would poll partition 0 beside loop 0.
	if len(f.doubled) > 0 {
		t.Fatalf("two polls of one partition at once: %v", f.doubled)
	}
}

// A partition whose polls fail does not stop the others': its loop backs
// off and retries on its own.
func TestWorkerPollsOtherPartitionsWhileOneIsDown(t *testing.T) {
	f := newFakeWorkers()
	f.partitions, f.downPartitions = 3, map[string]bool{"1": true}
	f.byPartition["0"] = []*dexv1.Task{noteTask("in-0")}
	f.byPartition["2"] = []*dexv1.Task{noteTask("in-2")}
	nodes := startWorkerNodes(t, f, 1)
	runWorker(t, nodes, WorkerOptions{Tools: []Tool{savingTool()}})
	f.waitFor(t, "the tasks of partitions 0 and 2 completed while partition 1's polls are retried", func() bool {
		return len(f.completes) == 2 && countPolls(f.polls)["1"] >= 3
	})
	f.mu.Lock()
	f.downPartitions = nil
	f.byPartition["1"] = []*dexv1.Task{noteTask("in-1")}
	f.mu.Unlock()
	f.waitFor(t, "partition 1's task completed once it is back", func() bool { return len(f.completes) == 3 })
}
