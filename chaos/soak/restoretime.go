package soak

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// A restore timed inside the soak's own process measures that process as
// much as the snapshot: the soak keeps a record of every call it made, so
// its heap grows over the run, and a restore's allocations then meet a
// heap of another size (a restore of a 3,000-turn session's state took
// 31 ms beside an empty heap and 54 ms beside 800 MB of bytes). A node's
// start restores into a fresh process, so the soak times its restores
// there too.

// RestoreTimer restores a node's newest raft snapshot offline (the node may
// run: its snapshot files are only read) and times the restore.
type RestoreTimer func(ctx context.Context, dataDir string) (RestoreTiming, error)

// RestoreTiming is one timed restore of a node's newest snapshot: its
// wall time, and the CPU time the process spent on it (every thread),
// which another process's load on the machine moves much less.
type RestoreTiming struct {
	Size  int64         `json:"size"`
	Index uint64        `json:"index"`
	Took  time.Duration `json:"restore_ns"`
	CPU   time.Duration `json:"restore_cpu_ns,omitempty"`
}

// inProcess is the RestoreTimer of a soak given none: RestoreNewest here.
func inProcess(_ context.Context, dataDir string) (RestoreTiming, error) {
	size, index, took, err := RestoreNewest(dataDir)
	return RestoreTiming{Size: size, Index: index, Took: took}, err
}

// RestoreOnce restores a node's newest snapshot once and times it: what
// the process of a ChildRestoreTimer runs.
func RestoreOnce(dataDir string) (RestoreTiming, error) {
	snaps, m, err := newestSnapshot(dataDir)
	if err != nil {
		return RestoreTiming{}, err
	}
	cpu0 := processCPU()
	took, err := timeRestore(snaps, m.ID)
	return RestoreTiming{Size: m.Size, Index: m.Index, Took: took, CPU: processCPU() - cpu0}, err
}

// ChildRestoreTimer times each restore in a process of its own: cmd with
// "--data-dir DIR" appended, which prints one RestoreTiming as JSON (what
// `dexchaos restore-time` does). Of tries restores it keeps the shortest
// wall time and the shortest CPU time, so that a CPU busy with the load
// for a moment does not count; a process that fails fails the timing with
// what it printed on stderr.
func ChildRestoreTimer(cmd []string, tries int) RestoreTimer {
	return func(ctx context.Context, dataDir string) (RestoreTiming, error) {
		var best RestoreTiming
		for i := range tries {
			t, err := restoreInChild(ctx, cmd, dataDir)
			if err != nil {
				return RestoreTiming{}, err
			}
			if i == 0 {
				best = t
			}
			best.Took, best.CPU = min(best.Took, t.Took), min(best.CPU, t.CPU)
		}
		return best, nil
	}
}

// processCPU is the CPU time this process has used, every thread.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func restoreInChild(ctx context.Context, cmd []string, dataDir string) (RestoreTiming, error) {
	if len(cmd) == 0 {
		return RestoreTiming{}, errors.New("no command to time a restore with")
	}
	c := exec.CommandContext(ctx, cmd[0], append(cmd[1:], "--data-dir", dataDir)...)
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	if err := c.Run(); err != nil {
		return RestoreTiming{}, fmt.Errorf("%s: %v: %s", strings.Join(cmd, " "), err, strings.TrimSpace(stderr.String()))
	}
	var t RestoreTiming
	if err := json.Unmarshal(stdout.Bytes(), &t); err != nil || t.Took <= 0 {
		return RestoreTiming{}, fmt.Errorf("%s printed %q, not a restore's timing", strings.Join(cmd, " "), strings.TrimSpace(stdout.String()))
	}
	return t, nil
}
