package harness

import (
	"io"
	"net"
	"sync"
	"time"
)

// linkProxy forwards TCP connections from its loopback port to target, with
// two switches: cut (open connections are closed, new ones are accepted
// and held silent, as a dropped link looks to the dialer) and latency
// (added before every forward write).
type linkProxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	cut     bool
	latency time.Duration
	conns   map[net.Conn]struct{} // both ends of forwarded connections, and held ones
	closed  bool
}

func newLinkProxy(target string) (*linkProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &linkProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	go p.acceptLoop()
	return p, nil
}

// Addr is the proxy's listening address.
func (p *linkProxy) Addr() string { return p.ln.Addr().String() }

func (p *linkProxy) acceptLoop() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.serve(c)
	}
}

func (p *linkProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *linkProxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *linkProxy) serve(in net.Conn) {
	if !p.track(in) {
		return
	}
	defer p.untrack(in)
	p.mu.Lock()
	cut := p.cut
	p.mu.Unlock()
	if cut {
		// Held silent until the link heals or the dialer gives up.
		_, _ = io.Copy(io.Discard, in)
		return
	}
	out, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		return
	}
	if !p.track(out) {
		return
	}
	defer p.untrack(out)
	done := make(chan struct{}, 2)
	go func() { p.pipe(out, in, true); done <- struct{}{} }()
	go func() { p.pipe(in, out, false); done <- struct{}{} }()
	<-done
}

// pipe copies src to dst until either fails; forward writes wait the
// link's latency first.
func (p *linkProxy) pipe(dst, src net.Conn, forward bool) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if forward {
				p.mu.Lock()
				d := p.latency
				p.mu.Unlock()
				if d > 0 {
					time.Sleep(d)
				}
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// SetCut cuts (true) or heals (false) the link. Cutting closes every open
// connection; healing closes the held ones so their dialers retry.
func (p *linkProxy) SetCut(cut bool) {
	p.mu.Lock()
	changed := p.cut != cut
	p.cut = cut
	var open []net.Conn
	if changed {
		for c := range p.conns {
			open = append(open, c)
		}
	}
	p.mu.Unlock()
	for _, c := range open {
		c.Close()
	}
}

// SetLatency sets the delay added to every forward write (0 removes it).
func (p *linkProxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	p.latency = d
	p.mu.Unlock()
}

// Close stops the proxy and closes every connection.
func (p *linkProxy) Close() {
	p.mu.Lock()
	p.closed = true
	var open []net.Conn
	for c := range p.conns {
		open = append(open, c)
	}
	p.mu.Unlock()
	p.ln.Close()
	for _, c := range open {
		c.Close()
	}
}
