package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// etcdOptions are the flags `dexbench etcd` adds: a put benchmark on a
// 3-member etcd, run beside each Dex run on the same machine, so the two
// replicated stores are compared under the same load of the machine.
type etcdOptions struct {
	bin       string
	clients   int
	duration  time.Duration
	warmup    time.Duration
	valueSize byteSize
	keyspace  int
}

// etcdKeyBytes is the length of every key: 8 hex digits.
const etcdKeyBytes = 8

func (eo *etcdOptions) register(fs *flag.FlagSet) {
	eo.valueSize = 256
	fs.StringVar(&eo.bin, "etcd-bin", "etcd", "the etcd server binary (Debian: apt-get install -y etcd-server)")
	fs.IntVar(&eo.clients, "etcd-clients", 64, "etcd clients putting at once, each with its own connection")
	fs.DurationVar(&eo.duration, "etcd-duration", 10*time.Second, "how long each etcd run is measured")
	fs.DurationVar(&eo.warmup, "etcd-warmup", 2*time.Second, "puts before each measured etcd run, not counted")
	fs.Var(&eo.valueSize, "etcd-value-size", "bytes of each put's value (default 256, or --payload when that is set)")
	fs.IntVar(&eo.keyspace, "etcd-keyspace", 10000, "distinct keys the puts draw from")
}

// resolve checks the etcd flags once the command line is parsed. With
// --payload and no --etcd-value-size, a put carries the payload's bytes,
// so both systems move the same data per operation.
func (eo *etcdOptions) resolve(fs *flag.FlagSet, o options) error {
	valueSet := false
	fs.Visit(func(f *flag.Flag) { valueSet = valueSet || f.Name == "etcd-value-size" })
	if !valueSet && o.payload > 0 {
		eo.valueSize = o.payload
	}
	if eo.clients < 1 || eo.keyspace < 1 || eo.keyspace > 1<<32-1 {
		return errors.New("--etcd-clients must be at least 1 and --etcd-keyspace between 1 and 2^32-1")
	}
	if eo.duration <= 0 || eo.warmup < 0 {
		return errors.New("--etcd-duration must be positive and --etcd-warmup not negative")
	}
	if eo.valueSize > 1<<20 {
		return errors.New("--etcd-value-size must be at most 1MiB (etcd's default request limit is 1.5 MiB)")
	}
	path, err := exec.LookPath(eo.bin)
	if err != nil {
		return fmt.Errorf("etcd server not found (%v): apt-get install -y etcd-server, or --etcd-bin", err)
	}
	eo.bin = path
	return nil
}

// etcdReport is one measured put run.
type etcdReport struct {
	Bench      string  `json:"bench"` // "etcd", to tell it from Dex's reports in a --json stream
	Version    string  `json:"etcd_version"`
	Members    int     `json:"members"`
	Clients    int     `json:"clients"`
	KeyBytes   int     `json:"key_bytes"`
	ValueBytes int     `json:"value_bytes"`
	Keyspace   int     `json:"keyspace"`
	Seconds    float64 `json:"seconds"`
	Puts       int     `json:"puts"`
	Errors     int     `json:"errors"`
	PutsPerSec float64 `json:"puts_per_sec"`
	Latency    *dist   `json:"put_latency"`
	// CPU seconds during the measured window, by member, and dexbench's
	// own (the clients).
	CPUSeconds            map[string]float64 `json:"cpu_seconds"`
	CPUMsPerPut           float64            `json:"cpu_ms_per_put"`
	MachineBusy           float64            `json:"machine_busy_pct"`
	MachineBusyCPUSeconds float64            `json:"machine_busy_cpu_seconds"`
	MachineBusyMsPerPut   float64            `json:"machine_busy_ms_per_put"`
	Error                 string             `json:"error,omitempty"`
}

// runEtcd starts a fresh 3-member etcd in a temporary directory, measures
// puts on it and stops every member by PID, whatever happens (Ctrl-C
// included: the members run in their own process groups).
func runEtcd(ctx context.Context, o options, eo etcdOptions) (rep *etcdReport, err error) {
	dir, err := os.MkdirTemp("", "dexbench-etcd-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if o.keep || (err != nil && ctx.Err() == nil) {
			fmt.Fprintf(os.Stderr, "dexbench: etcd data and logs kept in %s\n", dir)
			return
		}
		_ = os.RemoveAll(dir)
	}()
	c, err := startEtcd(eo.bin, dir)
	if err != nil {
		return nil, err
	}
	defer c.stop()
	hctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = c.waitHealthy(hctx)
	cancel()
	if err != nil {
		return nil, err
	}
	return putBench(ctx, c, eo)
}

// putBench runs eo.clients clients, each putting one value after another
// to random keys, for the warm-up and then the measured window.
func putBench(ctx context.Context, c *etcdCluster, eo etcdOptions) (*etcdReport, error) {
	rep := &etcdReport{Bench: "etcd", Members: len(c.members), Clients: eo.clients, KeyBytes: etcdKeyBytes,
		ValueBytes: int(eo.valueSize), Keyspace: eo.keyspace, CPUSeconds: map[string]float64{}}
	var clients []*clientv3.Client
	defer func() {
		for _, cl := range clients {
			_ = cl.Close()
		}
	}()
	for range eo.clients {
		cl, err := clientv3.New(clientv3.Config{Endpoints: c.endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			return rep, fmt.Errorf("etcd client: %w", err)
		}
		clients = append(clients, cl)
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	if st, err := clients[0].Status(sctx, c.endpoints()[0]); err == nil {
		rep.Version = st.Version
	}
	cancel()

	value := filler(int(eo.valueSize))
	var (
		measuring, stopping atomic.Bool
		errs                atomic.Int64
		wg                  sync.WaitGroup
		lats                = make([][]float64, len(clients))
	)
	for i, cl := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))
			for !stopping.Load() && ctx.Err() == nil {
				key := fmt.Sprintf("%0*x", etcdKeyBytes, r.Uint32N(uint32(eo.keyspace)))
				pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				t := time.Now()
				_, err := cl.Put(pctx, key, value)
				d := time.Since(t)
				cancel()
				// Only puts that end inside the measured window count.
				if !measuring.Load() {
					continue
				}
				if err != nil {
					errs.Add(1)
					continue
				}
				lats[i] = append(lats[i], ms(d))
			}
		}()
	}
	stopAll := func() { stopping.Store(true); wg.Wait() }
	sleep := func(d time.Duration) error {
		select {
		case <-ctx.Done():
			stopAll()
			return errors.New("interrupted")
		case <-time.After(d):
			return nil
		}
	}
	if err := sleep(eo.warmup); err != nil {
		return rep, err
	}
	pids := c.pids()
	cpu0 := map[string]float64{}
	for name, pid := range pids {
		cpu0[name] = procCPUSeconds(pid)
	}
	self0, m0, t0 := selfCPU(), machineCPU(), time.Now()
	measuring.Store(true)
	if err := sleep(eo.duration); err != nil {
		return rep, err
	}
	measuring.Store(false)
	wall := time.Since(t0).Seconds()
	m1 := machineCPU()
	rep.CPUSeconds["dexbench"] = round2(selfCPU() - self0)
	for name, pid := range pids {
		rep.CPUSeconds[name] = round2(procCPUSeconds(pid) - cpu0[name])
	}
	stopAll()

	all := slices.Concat(lats...)
	rep.Seconds = math.Round(wall*1000) / 1000
	rep.Puts, rep.Errors = len(all), int(errs.Load())
	rep.PutsPerSec = math.Round(float64(rep.Puts)/wall*10) / 10
	rep.Latency = newDist(all)
	rep.CPUMsPerPut = perOpMs(sumValues(rep.CPUSeconds), rep.Puts)
	if m0.total > 0 && m1.total > m0.total {
		rep.MachineBusy = math.Round((m1.busy-m0.busy)/(m1.total-m0.total)*1000) / 10
		rep.MachineBusyCPUSeconds = round2(m1.busy - m0.busy)
		rep.MachineBusyMsPerPut = perOpMs(rep.MachineBusyCPUSeconds, rep.Puts)
	}
	if rep.Puts == 0 {
		rep.Error = fmt.Sprintf("no put succeeded in %s (%d failed)", eo.duration, rep.Errors)
		return rep, errors.New(rep.Error)
	}
	return rep, nil
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }

func (r *etcdReport) writeTable(w io.Writer) {
	fmt.Fprintf(w, "etcd %s: %d members (fsync on), %d clients putting %d-byte values to %d-byte keys (%d distinct)\n\n",
		r.Version, r.Members, r.Clients, r.ValueBytes, r.KeyBytes, r.Keyspace)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "measured\t%.2f s\t(after the warm-up)\n", r.Seconds)
	fmt.Fprintf(tw, "puts\t%d\t%.1f puts/s, %d failed\n", r.Puts, r.PutsPerSec, r.Errors)
	if d := r.Latency; d != nil && d.N > 0 {
		fmt.Fprintf(tw, "put latency\tp50 %.1f ms\tp90 %.1f, p99 %.1f, max %.1f ms\n", d.P50, d.P90, d.P99, d.Max)
	}
	var cpu []string
	for name, s := range r.CPUSeconds {
		cpu = append(cpu, fmt.Sprintf("%s %.2f", name, s))
	}
	slices.Sort(cpu)
	fmt.Fprintf(tw, "CPU seconds\t%s\t(during the measured window; dexbench = the clients)\n", strings.Join(cpu, ", "))
	if r.MachineBusyCPUSeconds > 0 {
		fmt.Fprintf(tw, "machine busy\t%.1f%%\t%.2f CPU seconds, every process counted\n", r.MachineBusy, r.MachineBusyCPUSeconds)
	}
	fmt.Fprintf(tw, "CPU per put\t%.2f ms\t(the CPU seconds above ÷ puts; machine busy: %.2f ms per put)\n", r.CPUMsPerPut, r.MachineBusyMsPerPut)
	tw.Flush()
	if r.Error != "" {
		fmt.Fprintf(w, "\nerror: %s\n", r.Error)
	}
}

// benchWithEtcd alternates etcd and Dex runs (E D E D ...), each on a
// fresh cluster, so a drift of the shared machine's load hits both, then
// prints their medians side by side. It returns the exit code.
func benchWithEtcd(ctx context.Context, o options, eo etcdOptions) int {
	var etcdReps []*etcdReport
	var dexReps []*report
	for i := range o.runs {
		if i > 0 && !o.jsonOut {
			fmt.Println()
		}
		er, err := runEtcd(ctx, o, eo)
		if ctx.Err() != nil {
			fmt.Fprintln(os.Stderr, "dexbench: interrupted; every etcd it started is stopped")
			return 130
		}
		if er != nil {
			if o.jsonOut {
				writeJSON(os.Stdout, er)
			} else {
				er.writeTable(os.Stdout)
				fmt.Println()
			}
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "dexbench: etcd:", err)
			return 1
		}
		etcdReps = append(etcdReps, er)
		rep, code := benchOnce(ctx, o)
		if code != 0 {
			return code
		}
		dexReps = append(dexReps, rep)
	}
	c := compare(etcdReps, dexReps)
	if o.jsonOut {
		if o.runs > 1 {
			summarize(dexReps).writeJSON(os.Stdout)
		}
		writeJSON(os.Stdout, c)
		return 0
	}
	if o.runs > 1 {
		summarize(dexReps).writeTable(os.Stdout)
	}
	c.writeTable(os.Stdout)
	return 0
}
