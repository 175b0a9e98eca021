package main

import (
	"fmt"
	"io"
	"math"
	"text/tabwriter"
	"time"
)

// floorPacing says how the server paces the streams (floor_relay.go).
func floorPacing(senders int) string {
	return fmt.Sprintf("%s (one per stream Worker), each waking when a stream of its own is due but no sooner than %s after its last wake, as a Worker's output sender calls, and handing every due delta to its stream's goroutine, which sends it", plural(senders, "relay"), floorSpacing)
}

type floorConfig struct {
	Streams     int     `json:"streams"`
	Rate        float64 `json:"messages_per_sec_per_stream"`
	Seconds     float64 `json:"seconds"`
	Connections int     `json:"client_connections"`
	// Relays: the stream Workers whose calls the pacing follows.
	Relays int `json:"relays"`
	// A message: the dexv1.Event of one --stream delta, in bytes of
	// protobuf (gRPC adds 5 and HTTP/2 9 of framing).
	Message      string `json:"message"`
	MessageBytes int    `json:"message_bytes"`
	Pacing       string `json:"pacing"`
}

// floorSide is what one process, or both, used over the measured time.
type floorSide struct {
	PID        int     `json:"pid,omitempty"`
	CPUSeconds float64 `json:"cpu_seconds"`
	// CPU seconds ÷ messages received, in µs.
	CPUMicrosPerMessage float64 `json:"cpu_us_per_message"`
	// CPU seconds ÷ wall seconds: the CPUs it kept busy.
	CPUs float64 `json:"cpus"`
	// CPUs ÷ the machine's CPUs, in %.
	MachineShare float64 `json:"share_of_machine_pct"`
}

type floorReport struct {
	Bench   string      `json:"bench"` // "stream_floor"
	Machine machine     `json:"machine"`
	Config  floorConfig `json:"config"`
	// The measured time, once every stream delivered, and the messages
	// dexbench received in it.
	Seconds        float64 `json:"measured_seconds"`
	Messages       int64   `json:"messages"`
	MessagesPerSec float64 `json:"messages_per_sec"`
	TargetPerSec   float64 `json:"target_messages_per_sec"`
	// The server process, dexbench (the client side), and both.
	Server floorSide `json:"server"`
	Client floorSide `json:"client"`
	Both   floorSide `json:"both"`
	// Busy share of all CPUs over the measured time, every process counted.
	MachineBusy float64 `json:"machine_busy_pct"`
	// The server process was stopped by its PID and is gone.
	ServerStopped bool   `json:"server_stopped"`
	Error         string `json:"error,omitempty"`
}

func newFloorReport(f floorOptions, senders int) *floorReport {
	return &floorReport{Bench: "stream_floor", Machine: thisMachine(), Config: floorConfig{
		Streams: f.n, Rate: f.rate, Seconds: f.seconds, Connections: f.conns(), Relays: senders,
		Message: "dexv1.Event of a --stream delta (type output, its session and Step, attempt, offset, 12 bytes of text)", MessageBytes: floorMessageBytes(), Pacing: floorPacing(senders),
	}, TargetPerSec: float64(f.n) * f.rate}
}

// measured fills the figures of a measured span: messages received, CPU
// seconds of the server and of dexbench, and the machine's CPU times.
func (r *floorReport) measured(span time.Duration, messages int64, server, client float64, m0, m1 cpuTimes) {
	secs := span.Seconds()
	r.Seconds, r.Messages = round2(secs), messages
	if secs > 0 {
		r.MessagesPerSec = round1(float64(messages) / secs)
	}
	pid := r.Server.PID
	r.Server = r.side(server, secs, messages)
	r.Server.PID = pid
	r.Client = r.side(client, secs, messages)
	r.Both = r.side(server+client, secs, messages)
	if m0.total > 0 && m1.total > m0.total {
		r.MachineBusy = round1((m1.busy - m0.busy) / (m1.total - m0.total) * 100)
	}
}

func (r *floorReport) side(cpu, secs float64, messages int64) floorSide {
	s := floorSide{CPUSeconds: round2(cpu)}
	if messages > 0 {
		s.CPUMicrosPerMessage = round1(cpu / float64(messages) * 1e6)
	}
	if secs > 0 {
		s.CPUs = math.Round(cpu/secs*1000) / 1000
		if r.Machine.NProc > 0 {
			s.MachineShare = round1(cpu / secs / float64(r.Machine.NProc) * 100)
		}
	}
	return s
}

func (r *floorReport) writeTable(w io.Writer) {
	c := r.Config
	fmt.Fprintf(w, "dexbench --stream-floor: %s at %g messages/s each (%g/s asked) from one gRPC server process to dexbench over %s, no Dex\n",
		plural(c.Streams, "stream"), c.Rate, r.TargetPerSec, plural(c.Connections, "client connection"))
	fmt.Fprintf(w, "message: %d B of protobuf, the dexv1.Event of a --stream delta\npacing: %s\n", c.MessageBytes, c.Pacing)
	fmt.Fprintf(w, "machine: %d CPU, %s, %s %s\n", r.Machine.NProc, r.Machine.CPU, r.Machine.GoVersion, r.Machine.OS)
	if r.Messages > 0 || r.Seconds > 0 {
		asked := 0.0
		if r.TargetPerSec > 0 {
			asked = r.MessagesPerSec / r.TargetPerSec * 100
		}
		fmt.Fprintf(w, "\nmeasured %.2f s once every stream delivered: %d messages, %.1f/s (%.1f %% of asked); machine busy %.1f %%\n",
			r.Seconds, r.Messages, r.MessagesPerSec, asked, r.MachineBusy)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "\tCPU s\tµs / message\tCPUs\tshare of %d CPUs\t\n", r.Machine.NProc)
		row := func(name string, s floorSide) {
			fmt.Fprintf(tw, "%s\t%.2f\t%.1f\t%.3f\t%.1f %%\t\n", name, s.CPUSeconds, s.CPUMicrosPerMessage, s.CPUs, s.MachineShare)
		}
		row(fmt.Sprintf("server (pid %d)", r.Server.PID), r.Server)
		row("dexbench (client)", r.Client)
		row("both", r.Both)
		tw.Flush()
	}
	if r.Server.PID != 0 {
		state := "stopped, gone"
		if !r.ServerStopped {
			state = "NOT gone"
		}
		fmt.Fprintf(w, "server process %d: %s\n", r.Server.PID, state)
	}
	if r.Error != "" {
		fmt.Fprintf(w, "\nerror: %s\n", r.Error)
	}
}
