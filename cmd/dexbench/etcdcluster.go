package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dexhq/dex/chaos/harness"
)

// etcdMember is one etcd process of the comparison cluster.
type etcdMember struct {
	name      string
	clientURL string
	proc      *harness.Proc
}

// etcdCluster is three etcd members on loopback, each started and stopped
// by PID through the same supervisor as the dexd nodes.
type etcdCluster struct {
	members []*etcdMember
}

// startEtcd starts members m1..m3 of a new cluster in dir, on free loopback
// ports, with etcd's default heartbeat (100 ms) and election timeout
// (1000 ms) written out so a packaged default cannot move them.
func startEtcd(bin, dir string) (*etcdCluster, error) {
	const size = 3
	addrs, err := harness.FreeAddrs(2 * size)
	if err != nil {
		return nil, err
	}
	var initial []string
	for i := range size {
		initial = append(initial, fmt.Sprintf("m%d=http://%s", i+1, addrs[size+i]))
	}
	c := &etcdCluster{}
	for i := range size {
		name := fmt.Sprintf("m%d", i+1)
		clientURL, peerURL := "http://"+addrs[i], "http://"+addrs[size+i]
		p := &harness.Proc{
			Name:    "etcd " + name,
			Bin:     bin,
			LogPath: filepath.Join(dir, name+".log"),
			Args: []string{
				"--name", name,
				"--data-dir", filepath.Join(dir, name+".etcd"),
				"--listen-client-urls", clientURL, "--advertise-client-urls", clientURL,
				"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
				"--initial-cluster", strings.Join(initial, ","),
				"--initial-cluster-state", "new", "--initial-cluster-token", "dexbench-etcd",
				"--heartbeat-interval", "100", "--election-timeout", "1000",
				"--logger", "zap", "--log-outputs", "stderr",
			},
		}
		c.members = append(c.members, &etcdMember{name: name, clientURL: clientURL, proc: p})
		if err := p.Start(); err != nil {
			c.stop()
			return nil, err
		}
	}
	return c, nil
}

// stop sends every member SIGTERM at once and SIGKILLs those still running
// after 10 seconds.
func (c *etcdCluster) stop() {
	var wg sync.WaitGroup
	for _, m := range c.members {
		wg.Add(1)
		go func() { defer wg.Done(); _ = m.proc.Stop(10 * time.Second) }()
	}
	wg.Wait()
}

func (c *etcdCluster) endpoints() []string {
	var eps []string
	for _, m := range c.members {
		eps = append(eps, m.clientURL)
	}
	return eps
}

func (c *etcdCluster) pids() map[string]int {
	pids := map[string]int{}
	for _, m := range c.members {
		pids[m.name] = m.proc.PID()
	}
	return pids
}

// waitHealthy waits until every member answers /health with "true" (it has
// a leader and its raft is not stuck).
func (c *etcdCluster) waitHealthy(ctx context.Context) error {
	hc := &http.Client{Timeout: 500 * time.Millisecond}
	healthy := func(m *etcdMember) bool {
		resp, err := hc.Get(m.clientURL + "/health")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var h struct {
			Health string `json:"health"`
		}
		return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&h) == nil && h.Health == "true"
	}
	for {
		all := true
		for _, m := range c.members {
			if !m.proc.Running() {
				return fmt.Errorf("etcd %s exited: %v; its log:\n%s", m.name, m.proc.ExitErr(), tail(m.proc.Log(), 20))
			}
			all = all && healthy(m)
		}
		if all {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("etcd not healthy: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func tail(s string, lines int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(l[max(0, len(l)-lines):], "\n")
}

// procCPUSeconds is the CPU time (user + system) pid used so far, from
// /proc/PID/stat; dexd reports the same through process_cpu_seconds_total.
func procCPUSeconds(pid int) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces and parentheses: count
	// the fields after its last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	utime, err1 := strconv.ParseFloat(f[11], 64)
	stime, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return (utime + stime) / 100 // USER_HZ
}
