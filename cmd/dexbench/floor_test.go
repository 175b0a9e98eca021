package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

func floorOpts(n int, rate, seconds float64) options {
	o := options{workers: 4}
	o.floor = floorOptions{n: n, rate: rate, seconds: seconds}
	return o
}

func TestStreamFloorCheck_RefusesBadFlagsAndStartsNothing(t *testing.T) {
	if err := floorOpts(0, 0, 0).floor.check(options{}); err != nil {
		t.Fatalf("no --stream-floor: %v", err)
	}
	withStream := floorOpts(10, 20, 1)
	withStream.stream.n = 10
	tooManyWorkers := floorOpts(10, 20, 1)
	tooManyWorkers.workers = maxFloorSenders + 1
	for name, c := range map[string]struct {
		o    options
		want string
	}{
		"negative N":    {floorOpts(-1, 20, 30), "--stream-floor must not be negative"},
		"N too big":     {floorOpts(maxIndex+1, 20, 30), "--stream-floor must be at most 999999"},
		"zero rate":     {floorOpts(10, 0, 30), "--stream-floor-rate must be above 0 and at most 1000"},
		"negative rate": {floorOpts(10, -5, 30), "--stream-floor-rate must be above 0"},
		"rate too high": {floorOpts(10, 1001, 30), "--stream-floor-rate must be above 0 and at most 1000"},
		"zero seconds":  {floorOpts(10, 20, 0), "--stream-floor-seconds must be above 0"},
		"with --stream": {withStream, "--stream-floor is a mode of its own"},
		"workers":       {tooManyWorkers, "--stream-floor takes at most 1000 --workers"},
	} {
		rep, err := runStreamFloor(context.Background(), c.o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v; want %q", name, err, c.want)
			continue
		}
		if rep.Server.PID != 0 {
			t.Errorf("%s: refused, yet a server process (pid %d) was started", name, rep.Server.PID)
		}
	}
}

func TestStreamFloorFlags_ParseIntoTheOptions(t *testing.T) {
	var o options
	fs := benchFlags("dexbench", &o)
	if err := fs.Parse([]string{"--stream-floor", "1000", "--stream-floor-rate", "50", "--stream-floor-seconds", "10"}); err != nil {
		t.Fatal(err)
	}
	if o.floor.n != 1000 || o.floor.rate != 50 || o.floor.seconds != 10 {
		t.Errorf("options %+v", o.floor)
	}
	if err := o.check(); err != nil {
		t.Errorf("check: %v", err)
	}
	if got := o.floor.conns(); got != 10 {
		t.Errorf("1,000 streams on %d client connections; want 10, as --stream's watchers", got)
	}
	o.floor.rate = 0
	if err := o.check(); err == nil {
		t.Error("--stream-floor-rate 0 accepted by the options' check")
	}
}

func TestStreamFloor_ShortRunCountsMessagesAndStopsTheServer(t *testing.T) {
	rep, err := runStreamFloor(context.Background(), floorOpts(10, 20, 1))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Server.PID == 0 {
		t.Fatal("no server process was started")
	}
	if !processGone(rep.Server.PID) || !rep.ServerStopped {
		t.Errorf("the server process %d is still there (report says stopped: %v)", rep.Server.PID, rep.ServerStopped)
	}
	if rep.Messages <= 0 || rep.MessagesPerSec <= 0 {
		t.Errorf("%d messages, %v/s; want some", rep.Messages, rep.MessagesPerSec)
	}
	if rep.Config.Connections != 1 || rep.TargetPerSec != 200 {
		t.Errorf("%d connections, %v/s asked; want 1 and 200", rep.Config.Connections, rep.TargetPerSec)
	}
	var b strings.Builder
	rep.writeTable(&b)
	for _, want := range []string{"10 streams at 20 messages/s", "µs / message", "server (pid", "dexbench (client)", "stopped, gone"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, b.String())
		}
	}
	var j strings.Builder
	writeJSON(&j, rep)
	for _, want := range []string{`"bench": "stream_floor"`, `"cpu_us_per_message"`, `"share_of_machine_pct"`, `"server_stopped": true`} {
		if !strings.Contains(j.String(), want) {
			t.Errorf("the JSON lacks %s:\n%s", want, j.String())
		}
	}
}

func TestStreamFloor_AnInterruptStopsTheServer(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(500*time.Millisecond, cancel)
	start := time.Now()
	rep, err := runStreamFloor(ctx, floorOpts(10, 20, 60))
	if err == nil {
		t.Fatal("an interrupted run returned no error")
	}
	if time.Since(start) > 30*time.Second {
		t.Errorf("the interrupted run took %s", time.Since(start))
	}
	if rep.Server.PID == 0 || !processGone(rep.Server.PID) {
		t.Errorf("server process %d not stopped after the interrupt", rep.Server.PID)
	}
}

func TestFloorReport_PerMessageAndMachineShare(t *testing.T) {
	r := &floorReport{Machine: machine{NProc: 2}, Server: floorSide{PID: 42}}
	r.measured(10*time.Second, 200000, 4, 5, cpuTimes{busy: 10, total: 100}, cpuTimes{busy: 15, total: 120})
	if r.Server.CPUMicrosPerMessage != 20 || r.Client.CPUMicrosPerMessage != 25 || r.Both.CPUMicrosPerMessage != 45 {
		t.Errorf("µs per message %v, %v, %v; want 20, 25, 45", r.Server.CPUMicrosPerMessage, r.Client.CPUMicrosPerMessage, r.Both.CPUMicrosPerMessage)
	}
	if r.Server.MachineShare != 20 || r.Both.MachineShare != 45 || r.Both.CPUs != 0.9 {
		t.Errorf("share %v %%, %v %%, both %v CPUs; want 20, 45 and 0.9", r.Server.MachineShare, r.Both.MachineShare, r.Both.CPUs)
	}
	if r.MessagesPerSec != 20000 || r.MachineBusy != 25 || r.Server.PID != 42 {
		t.Errorf("%v messages/s, busy %v %%, pid %d; want 20000, 25, 42", r.MessagesPerSec, r.MachineBusy, r.Server.PID)
	}
}
