package main

import (
	"context"
	"flag"
	"fmt"
	"io"
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
// event each 1/rate s, paced as the leader receives deltas (floor_relay.go),
// until it is stopped (SIGTERM) or its parent is gone (stdin closed). No Dex
// runs in it: gRPC and the codec Dex's servers use.

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
	// maxFloorSenders bounds the relays (--workers of --stream-floor).
	maxFloorSenders = 1000
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

// floorServer serves the streams, each given to a relay in turn.
type floorServer struct {
	every  time.Duration
	relays []*floorRelay
	opened atomic.Int64
}

// watch serves one stream: it sends a delta event each time the stream's
// relay hands it one, as a watch sends what the hub relays.
func (s *floorServer) watch(_ any, ss grpc.ServerStream) error {
	req := &dexv1.WatchSessionRequest{}
	if err := ss.RecvMsg(req); err != nil {
		return err
	}
	ctx := ss.Context()
	k := s.opened.Add(1)
	st := newFloorStream(time.Now().Add(floorPhase(k, s.every)))
	defer st.closed.Store(true)
	s.relays[k%int64(len(s.relays))].add(st)
	d := newFloorDeltas(req.SessionId)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-st.wake:
		}
		if err := ss.SendMsg(d.next()); err != nil {
			return err
		}
	}
}

// serveFloor is the server process's main; args follow floorServeArg.
func serveFloor(args []string) int {
	fs := flag.NewFlagSet("dexbench "+floorServeArg, flag.ContinueOnError)
	rate := fs.Float64("rate", 20, "messages a second each stream")
	senders := fs.Int("senders", 4, "relays, one per stream Worker of --stream")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if !(*rate > 0 && *rate <= maxFloorRate) || *senders < 1 || *senders > maxFloorSenders {
		fmt.Fprintf(os.Stderr, "dexbench %s: --rate must be above 0 and at most %d, --senders from 1 to %d\n", floorServeArg, maxFloorRate, maxFloorSenders)
		return 2
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintf(os.Stderr, "dexbench %s: %v\n", floorServeArg, err)
		return 1
	}
	s := &floorServer{every: time.Duration(float64(time.Second) / *rate)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range *senders {
		r := newFloorRelay(s.every, floorSpacing)
		s.relays = append(s.relays, r)
		go r.run(ctx)
	}
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
