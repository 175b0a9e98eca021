package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/dexhq/dex/cluster/internal/peer"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// The cluster id. The first leader of a cluster makes it (16 random bytes,
// hex) and commits it (SetClusterId); every member records it in its data
// dir (node.json "cluster_id") and shows it in each raft handshake and
// Join. A node learns it from whichever comes first: its data dir, the
// replicated state, a Join answer or a peer's handshake. A data dir from
// before cluster ids has none and learns it the same way; a cluster whose
// nodes all come from before ids gets one from its next leader.

// newClusterID makes a random cluster id.
func newClusterID() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	return hex.EncodeToString(b)
}

// loadClusterIdentity reads the cluster id of the data dir (empty when it
// has none yet); learning one later records it there.
func loadClusterIdentity(dir string, log *zap.Logger) (*peer.ClusterIdentity, error) {
	var id string
	raw, err := os.ReadFile(filepath.Join(dir, identityFile))
	switch {
	case err == nil:
		var ident Identity
		if err := json.Unmarshal(raw, &ident); err != nil {
			return nil, fmt.Errorf("data dir %s is not a Dex data dir (%s is damaged)", dir, identityFile)
		}
		id = ident.ClusterID
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("read %s: %v", filepath.Join(dir, identityFile), err)
	}
	var mu sync.Mutex
	persist := func(id string) error {
		mu.Lock()
		defer mu.Unlock()
		var ident Identity
		raw, err := os.ReadFile(filepath.Join(dir, identityFile))
		if err != nil {
			return err
		}
		if err := json.Unmarshal(raw, &ident); err != nil {
			return err
		}
		ident.ClusterID = id
		return writeIdentity(dir, ident)
	}
	return peer.NewClusterIdentity(id, persist, log), nil
}

// ClusterID is the id of the cluster this node belongs to ("" while it has
// not learnt it).
func (n *Node) ClusterID() string { return n.ident.ID() }

// ForeignConnections counts raft connections refused because the other
// side belongs to another cluster.
func (n *Node) ForeignConnections() uint64 { return n.ident.ForeignConnections() }

// RefusedVotes counts vote requests refused before raft saw them (from a
// non-voter, or a leadership-transfer vote with a term beyond current + 1).
func (n *Node) RefusedVotes() uint64 { return n.trans.RefusedVotes() }

// CheckJoinClusterID refuses a joining node whose data dir names another
// cluster.
func (n *Node) CheckJoinClusterID(id string) error {
	if local := n.ident.ID(); id != "" && local != "" && id != local {
		return fmt.Errorf("the joining node belongs to cluster %s, this is cluster %s: wipe its data dir to join it as a new node", id, local)
	}
	return nil
}

// refuseExistingCluster asks every other peer's raft port, before this node
// bootstraps on an empty data dir, whether a cluster already runs there:
// bootstrapping would start a second history under the same addresses.
// Peers that do not answer are not evidence of anything and are skipped.
// When every peer that knows a cluster welcomes this node (the cluster's
// configuration names it, and it never held the cluster's data: a founding
// member started late), it returns the cluster id: the node then takes the
// log from the leader instead of bootstrapping.
func refuseExistingCluster(cfg Config) (welcomedBy string, err error) {
	type answer struct {
		peer    Peer
		id      string
		welcome bool
	}
	answers := make(chan answer, len(cfg.Peers))
	asked := 0
	for _, p := range cfg.Peers {
		if p.ID == cfg.ID {
			continue
		}
		asked++
		go func(p Peer) {
			id, welcome, err := peer.Probe(p.RaftAddr, cfg.ID, cfg.TLS, time.Second)
			if err != nil {
				id, welcome = "", false
			}
			answers <- answer{p, id, welcome}
		}(p)
	}
	var found []string
	welcomed := ""
	for i := 0; i < asked; i++ {
		a := <-answers
		switch {
		case a.id == "":
		case a.welcome:
			welcomed = a.id
		default:
			found = append(found, fmt.Sprintf("%s at %s", a.peer.ID, a.peer.RaftAddr))
			if len(found) == 1 {
				found[0] += " is in cluster " + a.id
			}
		}
	}
	if len(found) > 0 {
		return "", fmt.Errorf("a cluster already runs at these --peers (%s) and this data dir is empty: bootstrapping would start a second history; to add this node to that cluster start it with --join <gRPC address of a member>, or give a cluster that is really new other addresses", strings.Join(found, ", "))
	}
	return welcomed, nil
}

// neverHeldData reports whether the cluster's configuration names node id
// while the replicated state has no record of it: members record their
// addresses as soon as they run (the leader its own, followers through
// RegisterNode), so a member without one never ran with the cluster's log.
func (n *Node) neverHeldData(id string) bool {
	if n.nodeInfo(id) != nil {
		return false
	}
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == id {
			return true
		}
	}
	return false
}

// identityLoop learns the cluster id from the replicated state when the
// data dir has none, and reports a data dir whose id differs from it.
func (n *Node) identityLoop() {
	defer n.wg.Done()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	warned := false
	for {
		select {
		case <-n.shutdownCh:
			return
		case <-tick.C:
		}
		state := n.fsm.State().Meta().GetClusterId()
		if state == "" {
			continue
		}
		if local := n.ident.ID(); local == "" {
			_ = n.ident.Accept(state, "the replicated state", "learnt from")
		} else if local != state && !warned {
			warned = true
			n.log.Error("this node's data dir names cluster " + local + " but its replicated state names cluster " + state + ": the state came from another cluster; restore this node from its peers (docs/operating.md)")
		}
	}
}

// ensureClusterID commits the cluster id when the state has none: the id
// this node knows, or a new one (the first leader of a cluster).
func (n *Node) ensureClusterID(ctx context.Context) error {
	if n.fsm.State().Meta().GetClusterId() != "" {
		return nil
	}
	id := n.ident.ID()
	if id == "" {
		id = newClusterID()
	}
	// Ignorable: a node from before cluster ids skips it instead of halting.
	res, err := n.Propose(ctx, &fsmpb.Command{Ignorable: true, Body: &fsmpb.Command_SetClusterId{SetClusterId: &fsmpb.SetClusterId{ClusterId: id}}})
	if err != nil {
		return err
	}
	if res.Err != nil {
		return fmt.Errorf("set the cluster id: %v", res.Err)
	}
	if err := n.ident.Accept(id, "this leader", "made by"); err != nil {
		return err
	}
	n.log.Info("cluster id recorded", zap.String("cluster", id))
	return nil
}
