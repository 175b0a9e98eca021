package peer

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/dexhq/dex/api/tlsconf"
)

// Transport is raft's TCP transport with two guards: the cluster
// handshake on every connection (handshakeLayer) and a filter between the
// network and raft that answers vote requests breaking the membership
// rules itself, so they never move raft's term.
type Transport struct {
	*raft.NetworkTransport
	out      chan raft.RPC
	raft     atomic.Pointer[raft.Raft]
	log      *zap.Logger
	localID  string
	refused  atomic.Uint64
	stop     chan struct{}
	stopOnce sync.Once
}

// NewTransport listens on bind, advertising advertise (the listener's own
// address when nil), and guards what it accepts and dials with ident's
// handshake and, when peerTLS is set, mutual TLS.
func NewTransport(bind string, advertise net.Addr, ident *ClusterIdentity, cfg *raft.NetworkTransportConfig, log *zap.Logger, localID string, peerTLS *tlsconf.Store) (*Transport, error) {
	ln, err := Listen(bind, advertise, ident, log, peerTLS)
	if err != nil {
		return nil, err
	}
	return newTransport(ln.owningGroup(0), cfg, log, localID), nil
}

// NewGroupTransport is the transport of raft group g on a listener that
// serves several groups: closing it leaves the listener open.
func NewGroupTransport(l *Listener, g uint16, cfg *raft.NetworkTransportConfig, log *zap.Logger, localID string) (*Transport, error) {
	layer, err := l.Group(g)
	if err != nil {
		return nil, err
	}
	return newTransport(layer, cfg, log, localID), nil
}

func newTransport(layer raft.StreamLayer, cfg *raft.NetworkTransportConfig, log *zap.Logger, localID string) *Transport {
	cfg.Stream = layer
	t := &Transport{
		NetworkTransport: raft.NewNetworkTransportWithConfig(cfg),
		out:              make(chan raft.RPC),
		log:              log,
		localID:          localID,
		stop:             make(chan struct{}),
	}
	go t.filter()
	return t
}

// SetRaft gives the filter the raft whose term and configuration it checks.
func (t *Transport) SetRaft(r *raft.Raft) { t.raft.Store(r) }

// Consumer is what raft reads RPCs from: the filtered stream.
func (t *Transport) Consumer() <-chan raft.RPC { return t.out }

func (t *Transport) Close() error {
	t.stopOnce.Do(func() { close(t.stop) })
	return t.NetworkTransport.Close()
}

// RefusedVotes counts the vote requests the filter refused.
func (t *Transport) RefusedVotes() uint64 { return t.refused.Load() }

func (t *Transport) filter() {
	in := t.NetworkTransport.Consumer()
	for {
		var rpc raft.RPC
		select {
		case rpc = <-in:
		case <-t.stop:
			return
		}
		if req, ok := rpc.Command.(*raft.RequestVoteRequest); ok {
			if r := t.raft.Load(); r != nil {
				term := r.CurrentTerm()
				if reason := voteRefusal(req, term, r.GetConfiguration().Configuration().Servers); reason != "" {
					t.refused.Add(1)
					t.log.Warn("vote request refused before raft saw it", zap.String("candidate", candidateName(req)), zap.Uint64("candidate_term", req.Term), zap.Uint64("term", term), zap.String("reason", reason))
					rpc.Respond(&raft.RequestVoteResponse{RPCHeader: t.header(), Term: term, Granted: false}, nil)
					continue
				}
			}
		}
		select {
		case t.out <- rpc:
		case <-t.stop:
			return
		}
	}
}

func (t *Transport) header() raft.RPCHeader {
	return raft.RPCHeader{
		ProtocolVersion: raft.ProtocolVersionMax,
		ID:              []byte(t.localID),
		Addr:            t.EncodePeer(raft.ServerID(t.localID), t.LocalAddr()),
	}
}

// voteRefusal says why a vote request must not reach raft ("" lets it
// through). Only a current voter may ask for a vote (a node of the cluster
// being built, with no configuration yet, lets every request through), and
// a leadership-transfer vote, which skips raft's "I have a leader" check,
// may carry at most the current term + 1: the one a real transfer uses.
func voteRefusal(req *raft.RequestVoteRequest, term uint64, servers []raft.Server) string {
	if len(servers) == 0 {
		return ""
	}
	voter := false
	id, addr := string(req.ID), string(req.Addr)
	if addr == "" {
		addr = string(req.Candidate)
	}
	for _, s := range servers {
		match := (id != "" && string(s.ID) == id && (addr == "" || string(s.Address) == addr)) ||
			(id == "" && string(s.Address) == addr)
		if match && s.Suffrage == raft.Voter {
			voter = true
		}
	}
	if !voter {
		return "the candidate is not a voter of this cluster"
	}
	if req.LeadershipTransfer && req.Term > term+1 {
		return fmt.Sprintf("a leadership-transfer vote for term %d, beyond the current term %d + 1", req.Term, term)
	}
	return ""
}

func candidateName(req *raft.RequestVoteRequest) string {
	addr := req.Addr
	if len(addr) == 0 {
		addr = req.Candidate
	}
	return fmt.Sprintf("%s (%s)", req.ID, addr)
}
