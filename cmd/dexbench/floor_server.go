package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/wirecodec"
)

// The server process of --stream-floor (floor.go): dexbench run again with
// floorServeArg first. It serves one server-streaming method on a free
// loopback port, says the address on stdout, and sends every stream a delta
// event each 1/rate s until it is stopped (SIGTERM) or its parent is gone
// (stdin closed). No Dex runs in it: gRPC and the codec Dex's servers use.

// floorServeArg, first on the command line, runs the server process. It is
// not a flag: the usage does not list it.
const floorServeArg = "stream-floor-server"

const (
	floorService = "dexbench.StreamFloor"
	floorMethod  = "/" + floorService + "/Watch"
	// floorTurnDeltas is a turn's deltas, as --stream-deltas' default: a
	// stream's offset starts again at 0 and its Step id changes after so
	// many, so the varints are as long as the --stream bench's.
	floorTurnDeltas = 600
	// maxFloorRate bounds the messages a second of a stream, as
	// --stream-rate is bounded.
	maxFloorRate = 1000
)

// floorStreamDesc is the method, for the client side.
var floorStreamDesc = grpc.StreamDesc{StreamName: "Watch", ServerStreams: true}

// floorTexts are a turn's delta texts, the --stream bench's.
var floorTexts = deltaTexts(floorTurnDeltas)

// floorDeltas makes one stream's messages: the "output" event a watch of
// the --stream bench gets for each delta (api/server's outputEvent), turn
// after turn.
type floorDeltas struct {
	session string
	step    string
	turn    int
	i       int
	offset  uint64
}

func newFloorDeltas(session string) *floorDeltas {
	d := &floorDeltas{session: session, turn: 1}
	d.step = floorStepID(session, d.turn)
	return d
}

func floorStepID(session string, turn int) string { return session + "-s" + strconv.Itoa(turn) }

// next is the stream's next message, a new one each time as a watch sends.
func (d *floorDeltas) next() *dexv1.Event {
	if d.i == floorTurnDeltas {
		d.turn++
		d.i, d.offset, d.step = 0, 0, floorStepID(d.session, d.turn)
	}
	text := floorTexts[d.i]
	e := &dexv1.Event{SessionId: d.session, Type: "output", StepId: d.step, Output: &dexv1.OutputDelta{Attempt: 1, Offset: d.offset, Text: text}}
	d.i++
	d.offset += uint64(len(text))
	return e
}

// floorMessageBytes is the size of a typical message on the wire (the
// protobuf, without gRPC's 5-byte prefix and HTTP/2's 9-byte frame
// header): one from the middle of a turn of stream 0.
func floorMessageBytes() int {
	d := newFloorDeltas(sessionID(streamPrefix, 0))
	for range floorTurnDeltas / 2 {
		d.next()
	}
	return d.next().SizeVT()
}

// floorServer paces the streams: each stream's handler wakes on a ticker of
// its own and sends, as each watch of the hub wakes on its own channel for
// each delta; the k-th stream opened starts at k × the golden ratio (mod 1)
// of the period, so that the streams' sends spread evenly over it, as the
// Workers' deltas do, instead of all waking on one tick (which would let
// HTTP/2 write a hundred messages at once and understate the cost).
type floorServer struct {
	every  time.Duration
	opened atomic.Int64
}

func (s *floorServer) watch(_ any, ss grpc.ServerStream) error {
	req := &dexv1.WatchSessionRequest{}
	if err := ss.RecvMsg(req); err != nil {
		return err
	}
	ctx := ss.Context()
	phase := time.NewTimer(floorPhase(s.opened.Add(1), s.every))
	select {
	case <-ctx.Done():
		phase.Stop()
		return nil
	case <-phase.C:
	}
	tick := time.NewTicker(s.every)
	defer tick.Stop()
	d := newFloorDeltas(req.SessionId)
	for {
		if err := ss.SendMsg(d.next()); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// floorPhase is where in the period the k-th stream starts.
func floorPhase(k int64, every time.Duration) time.Duration {
	const golden = 0.6180339887498949
	_, frac := math.Modf(float64(k) * golden)
	return time.Duration(frac * float64(every))
}

// serveFloor is the server process's main; args follow floorServeArg.
func serveFloor(args []string) int {
	fs := flag.NewFlagSet("dexbench "+floorServeArg, flag.ContinueOnError)
	rate := fs.Float64("rate", 20, "messages a second each stream")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if !(*rate > 0 && *rate <= maxFloorRate) {
		fmt.Fprintf(os.Stderr, "dexbench %s: --rate must be above 0 and at most %d\n", floorServeArg, maxFloorRate)
		return 2
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintf(os.Stderr, "dexbench %s: %v\n", floorServeArg, err)
		return 1
	}
	s := &floorServer{every: time.Duration(float64(time.Second) / *rate)}
	srv := grpc.NewServer(wirecodec.ServerOption())
	srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: floorService,
		HandlerType: (*any)(nil),
		Streams:     []grpc.StreamDesc{{StreamName: floorStreamDesc.StreamName, Handler: s.watch, ServerStreams: true}},
	}, nil)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	fmt.Println(lis.Addr().String())

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
	orphaned := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin) // EOF: the parent is gone
		close(orphaned)
	}()
	select {
	case <-stop:
	case <-orphaned:
	case err := <-served:
		fmt.Fprintf(os.Stderr, "dexbench %s: %v\n", floorServeArg, err)
		return 1
	}
	srv.Stop()
	return 0
}
