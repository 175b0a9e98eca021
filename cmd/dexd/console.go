package main

import (
	"context"
	"flag"
	"net/http"
	"slices"
	"strings"
	"sync"

	"google.golang.org/grpc"

	"github.com/dexhq/dex/api/client"
	"github.com/dexhq/dex/api/console"
	"github.com/dexhq/dex/api/tlsconf"
	"github.com/dexhq/dex/cluster"
)

// consoleOptions are the web console's flags.
type consoleOptions struct {
	chaosReport string
}

func (c *consoleOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&c.chaosReport, "chaos-report", "", "`DIR` holding the matrix.json of a dexchaos matrix --out DIR run: the console's Chaos page shows it")
}

// withConsole serves the console under /ui/ beside h, and sends a browser
// that opens the node's bare address (/) to it.
func withConsole(h http.Handler, ui http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(console.Prefix, ui)
	mux.Handle("GET /{$}", http.RedirectHandler(console.Prefix, http.StatusFound))
	mux.Handle("/", h)
	return mux
}

// newConsole wires the console to this node: its pages read and act
// through the API like dexctl, over a channel that follows the lease
// holder among the members' gRPC addresses, with this node's client TLS.
// The caller's own token goes with each call; the node's token never does.
func newConsole(node *cluster.Node, o *options, tlsStore *tlsconf.Store) (*console.Console, func()) {
	dialOpts := client.DialOptions(tlsStore)
	sessions := &followConn{self: o.grpcAddr, members: func() []string {
		var out []string
		for _, n := range node.State().Nodes() {
			if n.GrpcAddress != "" {
				out = append(out, n.GrpcAddress)
			}
		}
		return out
	}, opts: dialOpts}
	self, err := client.Dial(o.grpcAddr, append(dialOpts, grpc.WithDefaultServiceConfig(`{}`))...)
	if err != nil {
		panic(err) // only a malformed address, which parse refused
	}
	ui := console.New(console.Config{
		Sessions: sessions, Admin: self, ACL: o.sec.acl, ChaosReport: o.console.chaosReport,
		SecureCookies: o.tls.httpTLS,
		Where: func() console.Where {
			st := node.Status()
			w := console.Where{Node: st.ID, Role: st.State, LeaderID: st.LeaderID}
			if l := node.Leader(); l != nil {
				w.LeaderAddr = l.GrpcAddress
			}
			return w
		},
	})
	return ui, func() { sessions.close(); self.Close() }
}

// followConn is a dex:/// channel over the members' gRPC addresses, dialed
// again when the membership changes.
type followConn struct {
	self    string
	members func() []string
	opts    []grpc.DialOption

	mu     sync.Mutex
	target string
	conn   *grpc.ClientConn
}

func (f *followConn) current() (*grpc.ClientConn, error) {
	addrs := f.members()
	if !slices.Contains(addrs, f.self) {
		addrs = append(addrs, f.self)
	}
	slices.Sort(addrs)
	target := client.Scheme + ":///" + strings.Join(addrs, ",")
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conn != nil && f.target == target {
		return f.conn, nil
	}
	conn, err := client.Dial(target, f.opts...)
	if err != nil {
		return nil, err
	}
	if f.conn != nil {
		old := f.conn
		go old.Close()
	}
	f.target, f.conn = target, conn
	return conn, nil
}

func (f *followConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	c, err := f.current()
	if err != nil {
		return err
	}
	return c.Invoke(ctx, method, args, reply, opts...)
}

func (f *followConn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	c, err := f.current()
	if err != nil {
		return nil, err
	}
	return c.NewStream(ctx, desc, method, opts...)
}

func (f *followConn) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conn != nil {
		f.conn.Close()
	}
}
