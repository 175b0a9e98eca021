package harness

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"testing"
	"time"
)

// echoServer answers every line with the same line.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

// roundTrip sends a line over c and reads it back, waiting at most 2 s.
func roundTrip(c net.Conn) error {
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err == nil && line != "ping\n" {
		return fmt.Errorf("echoed %q", line)
	}
	return err
}

func dialProxy(t *testing.T, p *linkProxy) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// A cut closes the open connection and holds a new one silent; after Heal
// a new connection works again.
func TestLinkProxy_CutClosesOpenConnectionsAndHealRestores(t *testing.T) {
	p, err := newLinkProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	open := dialProxy(t, p)
	if err := roundTrip(open); err != nil {
		t.Fatalf("through the proxy before the cut: %v", err)
	}
	p.SetCut(true)
	if err := roundTrip(open); err == nil {
		t.Fatal("the open connection still carried data after the cut")
	}
	held := dialProxy(t, p)
	if err := roundTrip(held); err == nil {
		t.Fatal("a new connection carried data while the link was cut")
	}
	p.SetCut(false)
	if err := roundTrip(dialProxy(t, p)); err != nil {
		t.Fatalf("a new connection after Heal: %v", err)
	}
}

// Latency delays the forward direction; 0 removes it.
func TestLinkProxy_LatencyDelaysAndZeroRemovesIt(t *testing.T) {
	p, err := newLinkProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c := dialProxy(t, p)
	p.SetLatency(300 * time.Millisecond)
	start := time.Now()
	if err := roundTrip(c); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("a round trip took %s with 300ms of latency on the link", d)
	}
	p.SetLatency(0)
	if err := roundTrip(c); err != nil {
		t.Fatalf("after removing the latency: %v", err)
	}
}

func TestNetwork_UnknownNodeIsAHarnessError(t *testing.T) {
	nf, err := newNetFaults([]*Node{{ID: "n1", RaftAddr: "127.0.0.1:1"}, {ID: "n2", RaftAddr: "127.0.0.1:2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer nf.Close()
	for name, f := range map[string]func(){
		"Cut":     func() { nf.Cut("n1", "n9") },
		"Isolate": func() { nf.Isolate("n9") },
		"Latency": func() { nf.Latency("n9", "n1", time.Second) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s with an unknown node did not panic", name)
				}
			}()
			f()
		}()
	}
	nf.Partition("n1", "n2")
	if !nf.link("n1", "n2").cut || !nf.link("n2", "n1").cut {
		t.Fatal("Partition did not cut both ways")
	}
	nf.Heal()
	if nf.link("n1", "n2").cut || nf.link("n2", "n1").cut {
		t.Fatal("Heal left a link cut")
	}
}
