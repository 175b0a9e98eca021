package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/wirecodec"
)

// The --stream-floor mode measures what the bare transport costs per
// message, with no Dex in it: the floor under the CPU per delta of --stream.
// dexbench runs itself again as a server process (floor_server.go) that
// sends N server streams a delta event each 1/rate s over gRPC, paced as
// the leader receives the deltas of --workers stream Workers; dexbench
// opens the N streams over as many client connections as --stream's
// watchers use (one per watchersPerConn) and counts what arrives. Once every
// stream delivers, it reads both processes' CPU (utime + stime in
// /proc/PID/stat) over --stream-floor-seconds, and reports CPU per message,
// messages/s and each process's share of the machine's CPUs.

// floorOpenTimeout bounds how long the streams take to deliver their first
// message.
const floorOpenTimeout = 30 * time.Second

type floorOptions struct {
	n       int
	rate    float64
	seconds float64
	// exe is the program run as the server process (empty: this one).
	exe string
}

func (f *floorOptions) register(fs *flag.FlagSet) {
	fs.IntVar(&f.n, "stream-floor", 0, "measure the bare transport under --stream, with no Dex: a gRPC server process of dexbench's own sends this many streams a delta event each, paced as the leader gets the deltas of --workers stream Workers, over as many client connections as --stream's watchers use; reports CPU per message of the server and of dexbench, messages/s and the share of the machine's CPUs (0: off)")
	fs.Float64Var(&f.rate, "stream-floor-rate", 20, "--stream-floor: messages a second each stream")
	fs.Float64Var(&f.seconds, "stream-floor-seconds", 30, "--stream-floor: seconds measured, once every stream delivers")
}

// check refuses what --stream-floor cannot run with.
func (f floorOptions) check(o options) error {
	if f.n < 0 {
		return errors.New("--stream-floor must not be negative")
	}
	if f.n == 0 {
		return nil
	}
	if f.n > maxIndex {
		return fmt.Errorf("--stream-floor must be at most %d", maxIndex)
	}
	if !(f.rate > 0 && f.rate <= maxFloorRate) {
		return fmt.Errorf("--stream-floor-rate must be above 0 and at most %d messages a second", maxFloorRate)
	}
	if !(f.seconds > 0 && f.seconds <= 3600) {
		return errors.New("--stream-floor-seconds must be above 0 and at most 3600")
	}
	if o.workers > maxFloorSenders {
		return fmt.Errorf("--stream-floor takes at most %d --workers", maxFloorSenders)
	}
	if o.stream.n > 0 || o.fairness.on {
		return errors.New("--stream-floor is a mode of its own: drop --stream and --fairness")
	}
	return nil
}

// conns is how many client connections the streams share: as many as
// --stream's watchers of as many sessions use.
func (f floorOptions) conns() int { return (f.n + watchersPerConn - 1) / watchersPerConn }

// streamFloorOnce runs --stream-floor and prints its report. A non-zero
// code is the exit code dexbench must stop with.
func streamFloorOnce(ctx context.Context, o options) int {
	rep, err := runStreamFloor(ctx, o)
	if err != nil {
		rep.Error = err.Error()
	}
	return printReport(ctx, o, rep, err, "the server process it started is stopped")
}

// runStreamFloor checks the options, starts the server process, measures,
// and stops the process by PID before it returns, whatever happened.
func runStreamFloor(ctx context.Context, o options) (rep *floorReport, err error) {
	f := o.floor
	rep = newFloorReport(f, o.workers)
	if err := f.check(o); err != nil {
		return rep, err
	}
	exe := f.exe
	if exe == "" {
		if exe, err = os.Executable(); err != nil {
			return rep, err
		}
	}
	srv, err := startFloorServer(ctx, exe, f.rate, o.workers)
	if err != nil {
		return rep, err
	}
	rep.Server.PID = srv.pid()
	defer func() {
		rep.ServerStopped = srv.stop()
		if !rep.ServerStopped && err == nil {
			err = fmt.Errorf("the server process (pid %d) is still there after it was stopped", rep.Server.PID)
		}
	}()
	return rep, measureFloor(ctx, f, srv, rep)
}

// floorCount is one stream's messages, on a cache line of its own: the
// streams' goroutines count without sharing one.
type floorCount struct {
	n atomic.Int64
	_ [56]byte
}

// measureFloor opens the streams, waits until each delivers, measures over
// f.seconds and closes them.
func measureFloor(ctx context.Context, f floorOptions, srv *floorProcess, rep *floorReport) error {
	conns := make([]*grpc.ClientConn, f.conns())
	for i := range conns {
		cc, err := grpc.NewClient(srv.addr, grpc.WithTransportCredentials(insecure.NewCredentials()), wirecodec.DialOption())
		if err != nil {
			return err
		}
		defer cc.Close()
		conns[i] = cc
	}
	sctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	counts := make([]floorCount, f.n)
	failed := make(chan error, 1)
	for i := range f.n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := watchFloor(sctx, conns[i%len(conns)], sessionID(streamPrefix, i), &counts[i].n)
			if sctx.Err() == nil {
				select {
				case failed <- err:
				default:
				}
			}
		}()
	}
	total := func() int64 {
		var n int64
		for i := range counts {
			n += counts[i].n.Load()
		}
		return n
	}
	if err := awaitFloorStreams(ctx, counts, failed); err != nil {
		return err
	}

	self := os.Getpid()
	t0, n0, srv0, cli0, m0 := time.Now(), total(), procCPUSeconds(rep.Server.PID), procCPUSeconds(self), machineCPU()
	timer := time.NewTimer(time.Duration(f.seconds * float64(time.Second)))
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
		return errors.New("interrupted")
	case err := <-failed:
		return err
	}
	t1, n1, srv1, cli1, m1 := time.Now(), total(), procCPUSeconds(rep.Server.PID), procCPUSeconds(self), machineCPU()
	rep.measured(t1.Sub(t0), n1-n0, srv1-srv0, cli1-cli0, m0, m1)
	return nil
}

// awaitFloorStreams waits until every stream delivered a message.
func awaitFloorStreams(ctx context.Context, counts []floorCount, failed <-chan error) error {
	deadline := time.NewTimer(floorOpenTimeout)
	defer deadline.Stop()
	poll := time.NewTicker(10 * time.Millisecond)
	defer poll.Stop()
	for next := 0; ; {
		for next < len(counts) && counts[next].n.Load() > 0 {
			next++
		}
		if next == len(counts) {
			return nil
		}
		select {
		case <-poll.C:
		case err := <-failed:
			return err
		case <-deadline.C:
			return fmt.Errorf("stream %d of %d delivered nothing within %s", next+1, len(counts), floorOpenTimeout)
		case <-ctx.Done():
			return errors.New("interrupted")
		}
	}
}

// watchFloor opens one stream as a watch does and counts its messages until
// ctx ends or the stream fails.
func watchFloor(ctx context.Context, cc *grpc.ClientConn, id string, n *atomic.Int64) error {
	s, err := cc.NewStream(ctx, &floorStreamDesc, floorMethod, grpc.WaitForReady(true))
	if err != nil {
		return fmt.Errorf("stream %s: %w", id, err)
	}
	if err := s.SendMsg(&dexv1.WatchSessionRequest{SessionId: id, LiveOutput: true}); err != nil {
		return fmt.Errorf("stream %s: %w", id, err)
	}
	if err := s.CloseSend(); err != nil {
		return fmt.Errorf("stream %s: %w", id, err)
	}
	for {
		e := &dexv1.Event{} // a new one each message, as a generated client's Recv makes
		if err := s.RecvMsg(e); err != nil {
			return fmt.Errorf("stream %s ended: %w", id, err)
		}
		n.Add(1)
	}
}
