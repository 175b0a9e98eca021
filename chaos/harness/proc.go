// Package harness runs real dexd, dexworker and haproxy processes for the
// crash matrix, the soak and the benchmarks: clusters of dexd on loopback,
// Workers with their side-effect ledgers, link proxies that cut and slow
// raft and Worker traffic, failpoint builds, real signals. This file is the
// process supervisor: every process it starts runs on loopback ports of its
// own, in a temporary directory, and is stopped by PID.
package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// FreeAddr returns a loopback address whose port was free a moment ago.
func FreeAddr() (string, error) {
	addrs, err := FreeAddrs(1)
	if err != nil {
		return "", err
	}
	return addrs[0], nil
}

// handedOut remembers every port FreeAddrs returned in this process: a
// closed listener's port can come back from the kernel at once.
var handedOut sync.Map

// FreeAddrs returns n distinct loopback addresses whose ports were free a
// moment ago and were never returned before by this process. The ports lie
// below the kernel's ephemeral range when there is room: a node restarted
// on its port must find it free, and a port from that range can meanwhile
// be taken as the local end of any outgoing connection (a Worker's, a
// proxy's), which makes the restart fail with "address already in use".
func FreeAddrs(n int) ([]string, error) {
	var addrs []string
	for tries := 0; len(addrs) < n; tries++ {
		port := 0
		if lo, hi := stablePortRange(); hi > lo && tries < 1000 {
			port = lo + rand.IntN(hi-lo)
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			if port != 0 {
				continue // taken; draw again
			}
			return nil, err
		}
		addr := l.Addr().String()
		l.Close()
		if _, dup := handedOut.LoadOrStore(addr, true); !dup {
			addrs = append(addrs, addr)
		}
	}
	return addrs, nil
}

// stablePortRange is [10000, start of the ephemeral range), or an empty
// range when the ephemeral range starts too low to leave room.
func stablePortRange() (lo, hi int) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0
	}
	f := strings.Fields(string(b))
	if len(f) < 1 {
		return 0, 0
	}
	start, err := strconv.Atoi(f[0])
	if err != nil || start < 12000 {
		return 0, 0
	}
	return 10000, start
}

// Proc is one supervised process.
type Proc struct {
	Name    string
	Bin     string
	Args    []string
	LogPath string
	// Env: extra environment variables (KEY=VALUE) on top of the harness's.
	Env []string
	// Dir: the working directory ("": the harness's).
	Dir string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Start runs the process, appending its stdout and stderr to LogPath.
func (p *Proc) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && !p.exited() {
		return fmt.Errorf("%s is already running (pid %d)", p.Name, p.cmd.Process.Pid)
	}
	logf, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.Bin, p.Args...)
	if len(p.Env) > 0 {
		cmd.Env = append(os.Environ(), p.Env...)
	}
	cmd.Dir = p.Dir
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group, so a signal to the harness does not reach it
	// and a kill reaches nothing else.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done = cmd, done
	go func() {
		err := cmd.Wait()
		logf.Close()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

func (p *Proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// PID is the process id, or 0 when it never started.
func (p *Proc) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Running reports whether the process is alive (stopped counts as alive).
func (p *Proc) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil && !p.exited()
}

// Signal sends sig to the process.
func (p *Proc) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.exited() {
		return fmt.Errorf("%s is not running", p.Name)
	}
	return syscall.Kill(p.cmd.Process.Pid, sig)
}

// Kill sends SIGKILL and waits until the process is gone.
func (p *Proc) Kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	// The whole process group: a launcher's children (a shell, npx) die
	// with it.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGCONT) // a stopped process dies too
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
}

// Stop sends SIGTERM and waits up to timeout, then kills. It returns the
// process's exit error (nil for exit 0).
func (p *Proc) Stop(timeout time.Duration) error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = syscall.Kill(cmd.Process.Pid, syscall.SIGCONT)
	_ = syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(timeout):
		p.Kill()
		return fmt.Errorf("%s did not stop within %s after SIGTERM", p.Name, timeout)
	}
	return p.ExitErr()
}

// Wait waits for the process to exit.
func (p *Proc) Wait(ctx context.Context) error {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return errors.New("not started")
	}
	select {
	case <-done:
		return p.ExitErr()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ExitErr is the exit error of the last run.
func (p *Proc) ExitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Log returns what the process wrote so far.
func (p *Proc) Log() string {
	b, _ := os.ReadFile(p.LogPath)
	return string(b)
}

// Node is one dexd process and its addresses.
type Node struct {
	Proc
	ID       string
	RaftAddr string
	GRPCAddr string
	HTTPAddr string
	DataDir  string
	// leads: Ready asks /readyz/leader (a cluster of one partition, where
	// the harness waits for the leader), not /readyz (every healthy node).
	leads bool
}

// ClusterOptions configure a local cluster.
type ClusterOptions struct {
	BinDir string // holds dexd
	Dir    string // data dirs and logs go below it
	Size   int    // default 3
	// Extra flags for every dexd.
	Args []string
	// ACL: the nodes require tokens (see acl.go); also on with $DEX_CHAOS_ACL=1.
	ACL bool
	// TLS, when set, runs the nodes with mutual TLS on gRPC and raft;
	// without it DEX_CHAOS_TLS=1 makes a PKI in Dir/tls.
	TLS *PKI
	// NetFaults routes every raft link through a proxy of the harness so
	// Net() can cut and slow links (needs the chaos build of dexd).
	NetFaults bool
	// Partitions runs every dexd with --partitions N (0 or 1: one raft
	// group, no flag). Every node is then ready at once: WaitPartitions
	// and PartitionLeader find a partition's leader (partitions.go).
	Partitions int
}

// Cluster is a set of dexd processes on loopback.
type Cluster struct {
	Nodes []*Node
	opts  ClusterOptions
	// AdminToken is the bootstrap admin secret when ACLs are on.
	AdminToken string
	net        *netFaults
}

// NewCluster prepares (but does not start) a cluster on free ports.
func NewCluster(opts ClusterOptions) (*Cluster, error) {
	if opts.Size == 0 {
		opts.Size = 3
	}
	if opts.TLS == nil && TLSFromEnv() {
		pki, err := NewPKI(filepath.Join(opts.Dir, "tls"))
		if err != nil {
			return nil, err
		}
		opts.TLS = pki
	}
	c := &Cluster{opts: opts}
	var peers []string
	addrs, err := FreeAddrs(3 * opts.Size)
	if err != nil {
		return nil, err
	}
	for i := 1; i <= opts.Size; i++ {
		n := &Node{ID: fmt.Sprintf("n%d", i), DataDir: filepath.Join(opts.Dir, fmt.Sprintf("n%d", i)), leads: opts.Partitions <= 1}
		n.RaftAddr, n.GRPCAddr, n.HTTPAddr = addrs[3*(i-1)], addrs[3*(i-1)+1], addrs[3*(i-1)+2]
		peers = append(peers, n.ID+"="+n.RaftAddr)
		c.Nodes = append(c.Nodes, n)
	}
	var aclArgs []string
	if opts.ACL || ACLFromEnv() {
		if aclArgs, err = c.enableACL(); err != nil {
			return nil, err
		}
	}
	for _, n := range c.Nodes {
		n.Name = "dexd " + n.ID
		n.Bin = filepath.Join(opts.BinDir, "dexd")
		n.LogPath = filepath.Join(opts.Dir, n.ID+".log")
		n.Args = append([]string{
			"--id", n.ID, "--data-dir", n.DataDir, "--raft-addr", n.RaftAddr, "--grpc-addr", n.GRPCAddr,
			"--http-addr", n.HTTPAddr, "--peers", strings.Join(peers, ","),
		}, append(append(partitionArgs(opts.Partitions), opts.Args...), aclArgs...)...)
		if opts.TLS != nil {
			n.Args = append(n.Args, Args(opts.TLS.NodeFiles())...)
		}
	}
	if opts.NetFaults {
		if c.net, err = newNetFaults(c.Nodes); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Start starts every node.
func (c *Cluster) Start() error {
	for _, n := range c.Nodes {
		if err := n.Start(); err != nil {
			return err
		}
	}
	return nil
}

// KillAll SIGKILLs every node at once.
func (c *Cluster) KillAll() {
	var wg sync.WaitGroup
	for _, n := range c.Nodes {
		wg.Add(1)
		go func() { defer wg.Done(); n.Kill() }()
	}
	wg.Wait()
}

// StopAll stops every node (SIGTERM, then SIGKILL).
func (c *Cluster) StopAll() {
	var wg sync.WaitGroup
	for _, n := range c.Nodes {
		wg.Add(1)
		go func() { defer wg.Done(); _ = n.Stop(10 * time.Second) }()
	}
	wg.Wait()
}

// GRPCAddrs lists the nodes' gRPC addresses.
func (c *Cluster) GRPCAddrs() []string {
	var out []string
	for _, n := range c.Nodes {
		out = append(out, n.GRPCAddr)
	}
	return out
}

// Target is the readiness-following target of the Go library.
func (c *Cluster) Target() string { return "dex:///" + strings.Join(c.GRPCAddrs(), ",") }

// HTTPClient makes the harness's plain HTTP probes of a node (/readyz,
// gofail's endpoint, /metrics): each gives up after half a second.
var HTTPClient = &http.Client{Timeout: 500 * time.Millisecond}

// Ready reports whether the node answers 200 on its readiness path: in a
// cluster of one partition /readyz/leader (it leads, as one node at a
// time does), in a cluster of several /readyz (every healthy node is).
func (n *Node) Ready() bool { return n.answers200(n.ReadyPath()) }

// answers200 reports whether the node answers 200 on the HTTP path.
func (n *Node) answers200(path string) bool {
	resp, err := HTTPClient.Get("http://" + n.HTTPAddr + path)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode == http.StatusOK
}

// ReadyPath is the HTTP path Ready asks.
func (n *Node) ReadyPath() string {
	if n.leads {
		return "/readyz/leader"
	}
	return "/readyz"
}

// WaitReady waits until exactly one running node is ready (with ACLs: and
// every running node takes the admin token) and returns it. In a cluster
// of several partitions every node is ready: it waits as WaitPartitions
// does and returns the leader of partition 0.
func (c *Cluster) WaitReady(ctx context.Context) (*Node, error) {
	if c.Partitions() > 1 {
		return c.WaitPartitions(ctx, 0)
	}
	for {
		var ready []*Node
		for _, n := range c.Nodes {
			if n.Running() && n.Ready() {
				ready = append(ready, n)
			}
		}
		if len(ready) == 1 && c.tokenWorksOnAll(ctx) {
			return ready[0], nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("no single ready node: %d ready: %w", len(ready), ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ClusterArgs are the dexd flags of the suite: short attempt leases so a
// dead Worker's attempt fails within seconds.
var ClusterArgs = []string{"--heartbeat-timeout", "3s", "--heartbeat-interval", "500ms"}
