//go:build e2e

// Package local holds the tests of run-local.sh, the local cluster of make run.
package local

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dexhq/dex/deploy/internal/binaries"
)

// root is the repository.
var root = binaries.Root

func TestMain(m *testing.M) { binaries.Main(m) }

// scriptPorts is every port run-local.sh takes from a PORT_BASE.
func scriptPorts(base int) []int {
	var ports []int
	for k := 1; k <= 3; k++ {
		ports = append(ports, base+k, base+100+k, base+200+k)
	}
	return ports
}

// freePortBase finds a PORT_BASE whose nine ports are free now, away from
// the default 7000 and from the kernel's ephemeral range.
func freePortBase(t *testing.T) int {
	t.Helper()
	for range 50 {
		base := 10000 + 100*rand.IntN(200)
		free := true
		for _, p := range scriptPorts(base) {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				free = false
				break
			}
			l.Close()
		}
		if free {
			return base
		}
	}
	t.Fatal("no free port base found")
	return 0
}

// lockedBuffer collects the script's output while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// runLocal is run-local.sh running in a process group of its own, so the
// test can tell whether anything it started is left.
type runLocal struct {
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{}
}

func startRunLocal(t *testing.T, env ...string) *runLocal {
	t.Helper()
	r := &runLocal{cmd: exec.Command("bash", filepath.Join(root, "deploy", "local", "run-local.sh")), out: &lockedBuffer{}, done: make(chan struct{})}
	r.cmd.Dir = root
	r.cmd.Env = os.Environ()
	for _, e := range env {
		if e != "" {
			r.cmd.Env = append(r.cmd.Env, e)
		}
	}
	r.cmd.Stdout, r.cmd.Stderr = r.out, r.out
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.cmd.Wait(); close(r.done) }()
	t.Cleanup(func() {
		pid := r.cmd.Process.Pid
		select {
		case <-r.done:
		default:
			syscall.Kill(pid, syscall.SIGTERM)
			select {
			case <-r.done:
			case <-time.After(60 * time.Second):
			}
		}
		// Anything the script started and left behind is in its group.
		if syscall.Kill(-pid, 0) == nil {
			syscall.Kill(-pid, syscall.SIGKILL)
		}
	})
	return r
}

// wait waits for the script to exit and returns its exit code.
func (r *runLocal) wait(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-r.done:
		return r.cmd.ProcessState.ExitCode()
	case <-time.After(within):
		t.Fatalf("run-local.sh still running after %s; output:\n%s", within, r.out)
		return 0
	}
}

// leftBehind lists the processes still in the script's process group.
func (r *runLocal) leftBehind() []string {
	pgid := r.cmd.Process.Pid
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return nil
	}
	var left []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) > 2 && f[2] == fmt.Sprint(pgid) {
			cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			left = append(left, e.Name()+" "+string(bytes.ReplaceAll(cmdline, []byte{0}, []byte(" "))))
		}
	}
	if len(left) == 0 {
		left = []string{fmt.Sprintf("(a process of group %d)", pgid)}
	}
	return left
}

// A port of make run's taken by another program: the run stops at once
// with the node's own reason, starts no Worker and leaves nothing running.
func TestRunLocalStopsWhenAPortIsTaken(t *testing.T) {
	bin := binaries.Build(t)
	base := freePortBase(t)
	taken := fmt.Sprintf("127.0.0.1:%d", base+101) // n1's gRPC port
	lis, err := net.Listen("tcp", taken)
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	data := t.TempDir()
	r := startRunLocal(t, "BIN="+bin, "DATA="+data, fmt.Sprint("PORT_BASE=", base), "RESTART_AFTER=1")
	code := r.wait(t, 2*time.Minute)
	out := r.out.String()
	if code == 0 {
		t.Fatalf("run-local.sh exited 0 with n1's port taken; output:\n%s", out)
	}
	want := regexp.MustCompile(`(?m)^n1 cannot start: .*` + regexp.QuoteMeta(taken) + `.*address already in use$`)
	if !want.MatchString(out) {
		t.Fatalf("no line naming n1 and the taken port %s; output:\n%s", taken, out)
	}
	if strings.Contains(out, "restarting") || strings.Contains(out, "demo Worker running") {
		t.Fatalf("the run went on after n1 could not start; output:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(data, "logs", "worker.log")); err == nil {
		t.Fatalf("the demo Worker was started; output:\n%s", out)
	}
	if left := r.leftBehind(); len(left) > 0 {
		t.Fatalf("processes left behind: %v", left)
	}
}

// A node killed while the demo runs is started again; if its port was
// taken meanwhile, the run stops with its reason instead of restarting it
// for ever.
func TestRunLocalStopsWhenARestartedNodeCannotStart(t *testing.T) {
	bin := binaries.Build(t)
	base := freePortBase(t)
	data := t.TempDir()
	// The restart waits long enough for the test to take the port first.
	r := startRunLocal(t, "BIN="+bin, "DATA="+data, fmt.Sprint("PORT_BASE=", base), "RESTART_AFTER=15")
	for deadline := time.Now().Add(2 * time.Minute); !strings.Contains(r.out.String(), "Ctrl-C stops everything"); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the cluster did not come up; output:\n%s", r.out)
		}
	}
	pidText, err := os.ReadFile(filepath.Join(data, "pids", "n1.pid"))
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Sscan(string(pidText), &pid); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	taken := fmt.Sprintf("127.0.0.1:%d", base+101)
	var lis net.Listener
	for deadline := time.Now().Add(10 * time.Second); lis == nil; time.Sleep(100 * time.Millisecond) {
		if lis, err = net.Listen("tcp", taken); err != nil && time.Now().After(deadline) {
			t.Fatalf("cannot take n1's port after killing n1: %v", err)
		}
	}
	defer lis.Close()
	code := r.wait(t, 2*time.Minute)
	out := r.out.String()
	want := regexp.MustCompile(`(?m)^n1 cannot start: .*` + regexp.QuoteMeta(taken) + `.*address already in use$`)
	if code != 1 || !want.MatchString(out) {
		t.Fatalf("exit %d; want 1 and a line naming n1 and %s; output:\n%s", code, taken, out)
	}
	if n := strings.Count(out, "restarting n1"); n != 1 {
		t.Fatalf("n1 was restarted %d times; want once; output:\n%s", n, out)
	}
	if left := r.leftBehind(); len(left) > 0 {
		t.Fatalf("processes left behind: %v", left)
	}
}

// The failures that need no real cluster, with stand-in binaries: a node
// that exits without a reason of its own, and nodes that never elect.
func TestRunLocalStopsWhenTheClusterCannotStart(t *testing.T) {
	for _, tc := range []struct {
		name, dexd, env, want string
	}{
		{"a node exits", "#!/bin/sh\ncase \"$*\" in *\"--id n2 \"*) exit 3;; esac\nexec sleep 600\n", "", `(?m)^n2 cannot start: it exited with status 3 \(log: .*n2\.log\)$`},
		{"no leader", "#!/bin/sh\nexec sleep 600\n", "READY_WITHIN=1", `(?m)^no node of this cluster became a ready leader within 1s \(logs: .*\)$`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := t.TempDir()
			for name, body := range map[string]string{"dexd": tc.dexd, "dexworker": "#!/bin/sh\nexec sleep 600\n"} {
				if err := os.WriteFile(filepath.Join(bin, name), []byte(body), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			data := t.TempDir()
			r := startRunLocal(t, "BIN="+bin, "DATA="+data, fmt.Sprint("PORT_BASE=", freePortBase(t)), tc.env)
			code := r.wait(t, time.Minute)
			out := r.out.String()
			if code != 1 || !regexp.MustCompile(tc.want).MatchString(out) {
				t.Fatalf("exit %d, output:\n%s\nwant exit 1 and a line matching %s", code, out, tc.want)
			}
			if _, err := os.Stat(filepath.Join(data, "logs", "worker.log")); err == nil {
				t.Fatal("the demo Worker was started")
			}
			if left := r.leftBehind(); len(left) > 0 {
				t.Fatalf("processes left behind: %v", left)
			}
		})
	}
}

type session struct {
	Status  string `json:"status"`
	History []struct {
		Kind    string `json:"kind"`
		Tool    string `json:"tool"`
		Outcome string `json:"outcome"`
		Text    string `json:"text"`
	} `json:"history"`
	Steps []struct {
		ID     string `json:"id"`
		Kind   string `json:"kind"`
		Status string `json:"status"`
	} `json:"steps"`
}

// The commands make run prints lead a new user to a session that waits for
// their approval; approving it completes the turn. The question command
// leads to a session that waits for an answer.
func TestRunLocalDemoWaitsForApproval(t *testing.T) {
	bin := binaries.Build(t)
	base := freePortBase(t)
	r := startRunLocal(t, "BIN="+bin, "DATA="+t.TempDir(), fmt.Sprint("PORT_BASE=", base))

	// The printed commands, once the cluster is up.
	approveCmd := regexp.MustCompile(`(?m)^\s+(\S+/dexctl --addr (\S+) session start --message "deploy[^"]*")$`)
	askCmd := regexp.MustCompile(`(?m)^\s+(\S+/dexctl --addr \S+ session start --message "ask[^"]*")$`)
	var m, ask []string
	for deadline := time.Now().Add(2 * time.Minute); m == nil || ask == nil; time.Sleep(200 * time.Millisecond) {
		out := r.out.String()
		m, ask = approveCmd.FindStringSubmatch(out), askCmd.FindStringSubmatch(out)
		select {
		case <-r.done:
			t.Fatalf("run-local.sh exited %d; output:\n%s", r.cmd.ProcessState.ExitCode(), out)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no session start commands printed; output:\n%s", out)
		}
	}
	addrs := m[2]
	if want := fmt.Sprintf("http://127.0.0.1:%d/ui/sessions/", base+201); !strings.Contains(r.out.String(), want) {
		t.Errorf("the console's session URL %s is not printed", want)
	}
	dexctl := func(args ...string) []byte {
		t.Helper()
		out, err := exec.Command(filepath.Join(bin, "dexctl"), append([]string{"--addr", addrs}, args...)...).Output()
		if err != nil {
			t.Fatalf("dexctl %v: %v", args, err)
		}
		return out
	}
	show := func(id string) session {
		t.Helper()
		var s session
		if err := json.Unmarshal(dexctl("session", "show", id, "--json"), &s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	// waitFor polls the session until ok, and returns the step ok found.
	waitFor := func(id, what string, ok func(session) string) string {
		t.Helper()
		var s session
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			s = show(id)
			if step := ok(s); step != "" {
				return step
			}
		}
		t.Fatalf("session %s: no %s within a minute: %+v\noutput:\n%s", id, what, s, r.out)
		return ""
	}
	waiting := func(kind string) func(session) string {
		return func(s session) string {
			for _, st := range s.Steps {
				if st.Kind == kind && st.Status == "waiting" && s.Status == "waiting" {
					return st.ID
				}
			}
			return ""
		}
	}
	start := func(line string) string {
		t.Helper()
		cmd := exec.Command("bash", "-c", line) // as a user pastes it
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		return strings.TrimSpace(string(out))
	}

	id := start(m[1])
	step := waitFor(id, "approval waiting", waiting("AwaitToolApproval"))
	dexctl("approve", step)
	waitFor(id, "finished turn", func(s session) string {
		if s.Status != "idle" {
			return ""
		}
		ran, answered := false, false
		for _, h := range s.History {
			ran = ran || (h.Kind == "tool_result" && h.Tool == "deploy" && h.Outcome == "succeeded")
			answered = answered || (h.Kind == "assistant" && h.Text != "")
		}
		if ran && answered {
			return "done"
		}
		return ""
	})

	q := start(ask[1])
	waitFor(q, "question waiting", waiting("AwaitQuestionAnswer"))

	// The node's bare HTTP address leads to the console.
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(fmt.Sprintf("http://127.0.0.1:%d/", base+201))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/ui/" {
		t.Errorf("GET /: %d to %q; want 302 to /ui/", resp.StatusCode, resp.Header.Get("Location"))
	}

	// Ctrl-C's SIGINT (or SIGTERM) stops everything it started.
	syscall.Kill(r.cmd.Process.Pid, syscall.SIGINT)
	if code := r.wait(t, 2*time.Minute); code != 0 {
		t.Errorf("exit %d after SIGINT; output:\n%s", code, r.out)
	}
	if left := r.leftBehind(); len(left) > 0 {
		t.Fatalf("processes left behind: %v", left)
	}
}
