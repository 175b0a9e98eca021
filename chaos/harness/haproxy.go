package harness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/dexhq/dex/deploy/haproxy"
)

// HAProxyOptions configure a load balancer in front of a 3-node cluster.
type HAProxyOptions struct {
	Dir   string  // the config and the log go here
	Nodes []*Node // exactly 3: the config has three servers
	// Addr to listen on; default 127.0.0.1 on a free port.
	Addr string
}

// HAProxy is a supervised haproxy process running deploy/haproxy/haproxy.cfg:
// it sends clients and Workers to the node whose /readyz answers 200.
type HAProxy struct {
	Proc
	Addr   string // the one address for clients and Workers
	Config string // the config file it runs
}

// HAProxyAvailable reports whether the haproxy binary is installed.
func HAProxyAvailable() bool {
	_, err := exec.LookPath("haproxy")
	return err == nil
}

// HAProxyEnv is the environment that points deploy/haproxy/haproxy.cfg at
// nodes and makes it listen on addr.
func HAProxyEnv(addr string, nodes []*Node) ([]string, error) {
	if len(nodes) != 3 {
		return nil, fmt.Errorf("haproxy.cfg has 3 servers; got %d nodes", len(nodes))
	}
	env := []string{"DEX_LB_ADDR=" + addr}
	for i, n := range nodes {
		_, port, err := net.SplitHostPort(n.HTTPAddr)
		if err != nil {
			return nil, fmt.Errorf("node %s: http address %q: %v", n.ID, n.HTTPAddr, err)
		}
		env = append(env, fmt.Sprintf("DEX_N%d_GRPC=%s", i+1, n.GRPCAddr), fmt.Sprintf("DEX_N%d_HTTP_PORT=%s", i+1, port))
	}
	return env, nil
}

// StartHAProxy checks the shipped config and runs haproxy in the foreground
// (-db) in front of o.Nodes. It returns once the frontend accepts
// connections; Stop (or Kill) ends it by PID.
func StartHAProxy(o HAProxyOptions) (*HAProxy, error) {
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		return nil, fmt.Errorf("haproxy is not installed: %w", err)
	}
	if o.Addr == "" {
		if o.Addr, err = FreeAddr(); err != nil {
			return nil, err
		}
	}
	env, err := HAProxyEnv(o.Addr, o.Nodes)
	if err != nil {
		return nil, err
	}
	cfg := filepath.Join(o.Dir, "haproxy.cfg")
	if err := os.WriteFile(cfg, []byte(haproxy.Config), 0o644); err != nil {
		return nil, err
	}
	check := exec.Command(bin, "-c", "-f", cfg)
	check.Env = append(os.Environ(), env...)
	if out, err := check.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("haproxy -c -f %s: %v: %s", cfg, err, out)
	}
	envBin, err := exec.LookPath("env")
	if err != nil {
		return nil, err
	}
	// env(1) sets the addresses and execs haproxy in the same process, so
	// the PID the harness kills is haproxy's.
	args := append(append(env, bin), "-f", cfg, "-db")
	h := &HAProxy{
		Proc:   Proc{Name: "haproxy", Bin: envBin, Args: args, LogPath: filepath.Join(o.Dir, "haproxy.log")},
		Addr:   o.Addr,
		Config: cfg,
	}
	if err := h.Start(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		if c, err := net.DialTimeout("tcp", h.Addr, 200*time.Millisecond); err == nil {
			c.Close()
			if err := h.waitChecked(ctx, o.Nodes); err != nil {
				h.Kill()
				return nil, err
			}
			return h, nil
		}
		if !h.Running() {
			return nil, fmt.Errorf("haproxy exited at start: %s", Tail(h.Log(), 5))
		}
		select {
		case <-ctx.Done():
			h.Kill()
			return nil, fmt.Errorf("haproxy does not listen on %s: %s", h.Addr, Tail(h.Log(), 5))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitChecked waits until haproxy's checks have taken out of rotation every
// node that does not answer its check's /readyz/leader: haproxy starts with
// every server up, so until a follower's checks fail a Worker may connect
// to it, and lose the task its first poll was given when haproxy marks the
// follower down and cuts the connection.
func (h *HAProxy) waitChecked(ctx context.Context, nodes []*Node) error {
	for {
		log, pending := h.Log(), ""
		for i, n := range nodes {
			// The config names the servers n1, n2, n3 in the nodes' order.
			if !strings.Contains(log, fmt.Sprintf("Server dex_leader/n%d is DOWN", i+1)) && !n.answers200("/readyz/leader") {
				pending = n.ID
				break
			}
		}
		if pending == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("haproxy's checks have not marked %s down: %s", pending, Tail(log, 5))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Stop ends haproxy (SIGTERM, then SIGKILL). Dying of the SIGTERM is a
// clean stop.
func (h *HAProxy) Stop() error {
	err := h.Proc.Stop(5 * time.Second)
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGTERM {
			return nil
		}
	}
	return err
}
