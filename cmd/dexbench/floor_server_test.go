package main

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain lets the test binary be --stream-floor's server process, as
// dexbench is: startFloorServer runs this program again with floorServeArg.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == floorServeArg {
		os.Exit(serveFloor(os.Args[2:]))
	}
	os.Exit(m.Run())
}

func TestStartFloorServer_AServerThatFailsIsReportedAndGone(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The server process refuses a rate of 0 and ends before saying its
	// address.
	p, err := startFloorServer(context.Background(), exe, 0, 4)
	if err == nil {
		p.stop()
		t.Fatal("a server process that refused its rate was taken as started")
	}
	if !strings.Contains(err.Error(), "ended before it said its address") {
		t.Errorf("error %v", err)
	}
}

func TestFloorServer_EndsWhenItsParentIsGone(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p, err := startFloorServer(context.Background(), exe, 20, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer p.stop()
	// A parent that dies closes the server's stdin: the server ends on its
	// own, with no signal.
	_ = p.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the server ended with %v; want exit 0", err)
		}
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		t.Fatal("the server process kept running with its stdin closed")
	}
}

func TestFloorDeltas_AreTheStreamBenchsDeltaEvents(t *testing.T) {
	d := newFloorDeltas("stream-000007")
	first := d.next()
	if first.Type != "output" || first.StepId != "stream-000007-s1" || first.Output.Attempt != 1 || first.Output.Offset != 0 || first.Output.Text != deltaText(0) {
		t.Errorf("first message %v", first)
	}
	second := d.next()
	if second.Output.Offset != uint64(len(deltaText(0))) || second.Output.Text != deltaText(1) {
		t.Errorf("second message %v", second)
	}
	for range floorTurnDeltas - 2 {
		d.next()
	}
	if next := d.next(); next.StepId != "stream-000007-s2" || next.Output.Offset != 0 {
		t.Errorf("the message after a turn: %v; want offset 0 of stream-000007-s2", next)
	}
	if n := floorMessageBytes(); n < 50 || n > 100 {
		t.Errorf("a message is %d bytes; a --stream delta event is about 60", n)
	}
}
