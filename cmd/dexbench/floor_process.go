package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	// floorStartTimeout bounds how long the server process takes to say its
	// address.
	floorStartTimeout = 10 * time.Second
	// floorStopGrace is how long the server process has to end after
	// SIGTERM before it is killed.
	floorStopGrace = 5 * time.Second
)

// floorProcess is the server process of --stream-floor.
type floorProcess struct {
	cmd   *exec.Cmd
	stdin io.Closer
	addr  string

	once    sync.Once
	stopped bool
}

// startFloorServer runs exe as the server process, pacing each stream at
// rate through senders relays, and returns once it listens. It runs in a
// process group of its own, so Ctrl-C reaches only dexbench, which stops it
// by PID; were dexbench killed, the server sees its stdin close and ends.
// On an error nothing is left running.
func startFloorServer(ctx context.Context, exe string, rate float64, senders int) (*floorProcess, error) {
	cmd := exec.Command(exe, floorServeArg, "--rate", strconv.FormatFloat(rate, 'g', -1, 64), "--senders", strconv.Itoa(senders))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the server process: %w", err)
	}
	p := &floorProcess{cmd: cmd, stdin: stdin}
	said := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		said <- strings.TrimSpace(line)
	}()
	timer := time.NewTimer(floorStartTimeout)
	defer timer.Stop()
	select {
	case line := <-said:
		if _, _, err := net.SplitHostPort(line); err != nil {
			p.stop()
			return nil, fmt.Errorf("the server process (pid %d) ended before it said its address", p.pid())
		}
		p.addr = line
		return p, nil
	case <-timer.C:
		p.stop()
		return nil, fmt.Errorf("the server process (pid %d) did not say its address within %s", p.pid(), floorStartTimeout)
	case <-ctx.Done():
		p.stop()
		return nil, ctx.Err()
	}
}

func (p *floorProcess) pid() int { return p.cmd.Process.Pid }

// stop ends the server process by its PID (SIGTERM, then SIGKILL after
// floorStopGrace), waits for it, and reports whether it is gone. Only the
// first call acts.
func (p *floorProcess) stop() bool {
	p.once.Do(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		waited := make(chan struct{})
		go func() {
			_ = p.cmd.Wait()
			close(waited)
		}()
		select {
		case <-waited:
		case <-time.After(floorStopGrace):
			_ = p.cmd.Process.Kill()
			<-waited
		}
		_ = p.stdin.Close()
		p.stopped = processGone(p.pid())
	})
	return p.stopped
}

// processGone reports whether no process pid exists (it was reaped).
func processGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
