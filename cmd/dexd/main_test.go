//go:build e2e

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dexhq/dex/chaos/harness"
)

// Binaries built once for the process tests.
var dexdBin, dexctlBin, dexworkerBin string

func TestMain(m *testing.M) {
	harness.RunWithBinaries(binaries{m}, &binDir, "dexd", "dexctl", "dexworker")
}

// binDir holds the binaries the tests run; binaries names each before m runs.
var binDir string

type binaries struct{ m *testing.M }

func (b binaries) Run() int {
	dexdBin, dexctlBin, dexworkerBin = filepath.Join(binDir, "dexd"), filepath.Join(binDir, "dexctl"), filepath.Join(binDir, "dexworker")
	return b.m.Run()
}

func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := harness.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// freeAddrs returns n distinct free loopback addresses.
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	addrs, err := harness.FreeAddrs(n)
	if err != nil {
		t.Fatal(err)
	}
	return addrs
}

type proc struct {
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	done   chan struct{}
}

// startDexd starts a dexd process and kills it by PID at cleanup.
func startDexd(t *testing.T, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(dexdBin, args...), stderr: &bytes.Buffer{}, done: make(chan struct{})}
	p.cmd.Stderr = &lockedWriter{b: p.stderr}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			syscall.Kill(p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	})
	return p
}

type lockedWriter struct{ b *bytes.Buffer }

func (w *lockedWriter) Write(p []byte) (int, error) { return w.b.Write(p) }

func (p *proc) kill() {
	syscall.Kill(p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// runDexd runs dexd to completion (bounded) and returns its exit code and
// stderr.
func runDexd(t *testing.T, timeout time.Duration, args ...string) (int, string) {
	t.Helper()
	p := startDexd(t, args...)
	select {
	case <-p.done:
	case <-time.After(timeout):
		t.Fatalf("dexd %v still running after %s; stderr:\n%s", args, timeout, p.stderr.String())
	}
	return p.cmd.ProcessState.ExitCode(), strings.TrimSpace(p.stderr.String())
}

type testCluster struct {
	raft, grpc, http, dirs []string
	peers                  string
	procs                  []*proc
	extra                  []string // more flags for every node
}

func newTestCluster(t *testing.T) *testCluster {
	c := &testCluster{}
	var peers []string
	all := freeAddrs(t, 9)
	for i := 1; i <= 3; i++ {
		a := all[3*(i-1):]
		c.raft = append(c.raft, a[0])
		c.grpc = append(c.grpc, a[1])
		c.http = append(c.http, a[2])
		c.dirs = append(c.dirs, t.TempDir())
		peers = append(peers, fmt.Sprintf("n%d=%s", i, c.raft[i-1]))
	}
	c.peers = strings.Join(peers, ",")
	c.procs = make([]*proc, 3)
	return c
}

func (c *testCluster) args(i int) []string {
	return append([]string{
		"--id", fmt.Sprintf("n%d", i+1), "--data-dir", c.dirs[i],
		"--raft-addr", c.raft[i], "--grpc-addr", c.grpc[i], "--http-addr", c.http[i],
		"--peers", c.peers,
	}, c.extra...)
}

func (c *testCluster) startAll(t *testing.T) {
	for i := range 3 {
		c.procs[i] = startDexd(t, c.args(i)...)
	}
}

type statusOut struct {
	Leader       string `json:"leader"`
	Term         uint64 `json:"term"`
	CommitIndex  uint64 `json:"commit_index"`
	AppliedIndex uint64 `json:"applied_index"`
	Nodes        []struct {
		ID          string `json:"id"`
		RaftAddress string `json:"raft_address"`
		GRPCAddress string `json:"grpc_address"`
		Suffrage    string `json:"suffrage"`
		State       string `json:"state"`
	} `json:"nodes"`
}

func dexctlStatus(addrs []string) (*statusOut, error) {
	out, err := exec.Command(dexctlBin, "--addr", strings.Join(addrs, ","), "status", "--json").Output()
	if err != nil {
		return nil, err
	}
	var s statusOut
	if err := json.Unmarshal(out, &s); err != nil {
		return nil, fmt.Errorf("%v: %s", err, out)
	}
	return &s, nil
}

// waitHealthy waits for a status with three voters, one leader and two
// followers.
func waitHealthy(t *testing.T, c *testCluster, within time.Duration) *statusOut {
	t.Helper()
	deadline := time.Now().Add(within)
	var last *statusOut
	var lastErr error
	for time.Now().Before(deadline) {
		s, err := dexctlStatus(c.grpc)
		last, lastErr = s, err
		if err == nil && s.Leader != "" && len(s.Nodes) == 3 {
			leaders, followers := 0, 0
			for _, n := range s.Nodes {
				if n.Suffrage != "voter" {
					break
				}
				switch n.State {
				case "leader":
					leaders++
				case "follower":
					followers++
				}
			}
			if leaders == 1 && followers == 2 {
				return s
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	for i, p := range c.procs {
		if p != nil {
			t.Logf("n%d stderr:\n%s", i+1, p.stderr.String())
		}
	}
	t.Fatalf("no healthy cluster within %s: last status %+v, error %v", within, last, lastErr)
	return nil
}

func TestThreeNodesStatusAndFullRestart(t *testing.T) {
	c := newTestCluster(t)
	c.startAll(t)
	before := waitHealthy(t, c, 15*time.Second)
	// Followers record their addresses through the leader on their next
	// registration tick (every 2s).
	deadline := time.Now().Add(10 * time.Second)
	for missing := true; missing; {
		missing = false
		for _, n := range before.Nodes {
			if n.GRPCAddress == "" || n.RaftAddress == "" {
				missing = true
				if time.Now().After(deadline) {
					t.Fatalf("node without addresses: %+v", n)
				}
			}
		}
		if missing {
			time.Sleep(200 * time.Millisecond)
			before = waitHealthy(t, c, 15*time.Second)
		}
	}

	// A second dexd on a data dir in use fails clearly.
	a := freeAddrs(t, 3)
	other := a[0]
	code, stderr := runDexd(t, 10*time.Second, "--id", "n1", "--data-dir", c.dirs[0], "--raft-addr", other,
		"--grpc-addr", a[1], "--http-addr", a[2], "--peers", "n1="+other)
	if code != 1 || !strings.Contains(stderr, "in use") {
		t.Fatalf("second dexd on a used dir: exit %d, stderr %q", code, stderr)
	}

	// Let the follower registrations land, then read the commit index.
	time.Sleep(500 * time.Millisecond)
	before = waitHealthy(t, c, 15*time.Second)

	for _, p := range c.procs {
		p.kill()
	}
	c.startAll(t)
	after := waitHealthy(t, c, 15*time.Second)
	if after.CommitIndex < before.CommitIndex {
		t.Fatalf("commit index %d after the restart < %d before", after.CommitIndex, before.CommitIndex)
	}
	if after.Term <= before.Term {
		t.Fatalf("term %d after the restart, want > %d", after.Term, before.Term)
	}
}

func TestBadInput(t *testing.T) {
	base := func(dir string) []string {
		a := freeAddrs(t, 3)
		return []string{"--id", "n1", "--data-dir", dir, "--raft-addr", a[0],
			"--grpc-addr", a[1], "--http-addr", a[2], "--peers", "n1=" + a[0]}
	}
	oneLine := func(t *testing.T, code, wantCode int, stderr, want string) {
		t.Helper()
		if code != wantCode {
			t.Fatalf("exit %d, want %d; stderr:\n%s", code, wantCode, stderr)
		}
		if strings.Count(stderr, "\n") != 0 || !strings.Contains(stderr, want) {
			t.Fatalf("stderr %q: want one line containing %q", stderr, want)
		}
		if strings.Contains(stderr, "panic") || strings.Contains(stderr, "goroutine") {
			t.Fatalf("stderr shows a crash: %q", stderr)
		}
	}

	t.Run("corrupt raft.db", func(t *testing.T) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "node.json"), []byte(`{"node_id":"n1","cluster":"x"}`), 0o600)
		os.MkdirAll(filepath.Join(dir, "raft"), 0o700)
		garbage := bytes.Repeat([]byte("not a bolt database, just garbage "), 2000)
		os.WriteFile(filepath.Join(dir, "raft", "raft.db"), garbage, 0o600)
		code, stderr := runDexd(t, 10*time.Second, base(dir)...)
		oneLine(t, code, 1, stderr, filepath.Join(dir, "raft", "raft.db")+" is damaged")
		// raft.db is checked before the log is opened: the WAL is not made.
		if _, err := os.Stat(filepath.Join(dir, "raft", "wal")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("dexd refused raft.db but made %s (stat: %v)", filepath.Join(dir, "raft", "wal"), err)
		}
	})
	t.Run("corrupt wal-meta.db", func(t *testing.T) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "node.json"), []byte(`{"node_id":"n1","cluster":"x"}`), 0o600)
		os.MkdirAll(filepath.Join(dir, "raft", "wal"), 0o700)
		garbage := bytes.Repeat([]byte("not a bolt database, just garbage "), 2000)
		os.WriteFile(filepath.Join(dir, "raft", "wal", "wal-meta.db"), garbage, 0o600)
		code, stderr := runDexd(t, 10*time.Second, base(dir)...)
		oneLine(t, code, 1, stderr, filepath.Join(dir, "raft", "wal", "wal-meta.db")+" is damaged")
	})
	t.Run("foreign data dir", func(t *testing.T) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "node.json"), []byte(`{"node_id":"n2","cluster":"x"}`), 0o600)
		code, stderr := runDexd(t, 10*time.Second, base(dir)...)
		oneLine(t, code, 1, stderr, fmt.Sprintf("data dir %s belongs to node n2, not n1", dir))
	})
	t.Run("not a Dex data dir", func(t *testing.T) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "something"), []byte("x"), 0o600)
		code, stderr := runDexd(t, 10*time.Second, base(dir)...)
		oneLine(t, code, 1, stderr, "is not a Dex data dir")
	})
	usage := []struct {
		name, peers, want string
	}{
		{"id missing from peers", "n2=127.0.0.1:1,n3=127.0.0.1:2", "--id n1 is not in --peers"},
		{"duplicate ids", "n1=RAFT,n1=127.0.0.1:2", "node id n1 appears twice"},
		{"duplicate addresses", "n1=RAFT,n2=RAFT", "have the same address"},
		{"malformed peer", "n1=RAFT,n2=localhost", "is not HOST:PORT"},
	}
	for _, tc := range usage {
		t.Run(tc.name, func(t *testing.T) {
			args := base(t.TempDir())
			raft := args[5]
			args[len(args)-1] = strings.ReplaceAll(tc.peers, "RAFT", raft)
			code, stderr := runDexd(t, 10*time.Second, args...)
			oneLine(t, code, 2, stderr, tc.want)
		})
	}
	t.Run("zero worker ttl", func(t *testing.T) {
		code, stderr := runDexd(t, 10*time.Second, append(base(t.TempDir()), "--worker-ttl", "0s")...)
		oneLine(t, code, 2, stderr, "--worker-ttl must be positive")
	})
	t.Run("negative tool wait", func(t *testing.T) {
		code, stderr := runDexd(t, 10*time.Second, append(base(t.TempDir()), "--tool-wait", "-1s")...)
		oneLine(t, code, 2, stderr, "--tool-wait must not be negative")
	})
	t.Run("negative run timeout", func(t *testing.T) {
		code, stderr := runDexd(t, 10*time.Second, append(base(t.TempDir()), "--run-timeout", "-1s")...)
		oneLine(t, code, 2, stderr, "--run-timeout must be between 0 (no limit) and")
	})
	t.Run("malformed address", func(t *testing.T) {
		args := base(t.TempDir())
		args[7] = "127.0.0.1" // --grpc-addr without a port
		code, stderr := runDexd(t, 10*time.Second, args...)
		oneLine(t, code, 2, stderr, "--grpc-addr")
	})
	t.Run("unreachable join", func(t *testing.T) {
		args := base(t.TempDir())
		more := freeAddrs(t, 2)
		args = append(args[:8], "--http-addr", more[0], "--join", more[1], "--join-timeout", "3s")
		start := time.Now()
		code, stderr := runDexd(t, 20*time.Second, args...)
		if code != 1 {
			t.Fatalf("exit %d, want 1; stderr:\n%s", code, stderr)
		}
		lines := strings.Split(stderr, "\n")
		last := lines[len(lines)-1]
		if !strings.HasPrefix(last, "dexd: join through") {
			t.Fatalf("last stderr line %q: want a clear join error", last)
		}
		if d := time.Since(start); d > 15*time.Second {
			t.Fatalf("took %s to give up", d)
		}
	})
}
