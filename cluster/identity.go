package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// identityFile names the node a data dir belongs to.
const identityFile = "node.json"

// Identity is the content of DATA/node.json.
type Identity struct {
	NodeID string `json:"node_id"`
	// Cluster is a hash of the bootstrap peers, or "joined:ADDR" for a node
	// that joined a running cluster.
	Cluster string `json:"cluster"`
	// ClusterID is the cluster's random id (cluster_identity.go); absent
	// in a data dir from before ids and until the node first learns it.
	ClusterID string `json:"cluster_id,omitempty"`
	// Partitions is the cluster's number of raft groups; absent: 1 (a
	// data dir from before partitions is a cluster of one).
	Partitions int `json:"partitions,omitempty"`
}

// partitions is the number of raft groups the identity records.
func (i Identity) partitions() int { return max(i.Partitions, 1) }

// HasIdentity reports whether dir already holds a node's data (its
// node.json): such a node restarts from its own raft configuration.
func HasIdentity(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, identityFile))
	return err == nil
}

// RecordedPartitions is the number of partitions the data dir's node.json
// records, or 0 when it has none or cannot be read (opening the data dir
// then says why).
func RecordedPartitions(dir string) int {
	raw, err := os.ReadFile(filepath.Join(dir, identityFile))
	if err != nil {
		return 0
	}
	var ident Identity
	if json.Unmarshal(raw, &ident) != nil || ident.NodeID == "" {
		return 0
	}
	return ident.partitions()
}

// checkDataDir makes sure dir belongs to node id, of a cluster of
// partitions raft groups. It returns whether the directory was empty (or
// missing), in which case it creates it.
func checkDataDir(dir, id string, partitions int) (fresh bool, err error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) || (err == nil && len(entries) == 0) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return false, fmt.Errorf("create data dir %s: %w", dir, err)
		}
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("read data dir %s: %v", dir, err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, identityFile))
	if errors.Is(err, os.ErrNotExist) {
		return false, fmt.Errorf("data dir %s is not a Dex data dir (it is not empty and has no %s)", dir, identityFile)
	}
	if err != nil {
		return false, fmt.Errorf("read %s: %v", filepath.Join(dir, identityFile), err)
	}
	var ident Identity
	if err := json.Unmarshal(raw, &ident); err != nil || ident.NodeID == "" {
		return false, fmt.Errorf("data dir %s is not a Dex data dir (%s is damaged)", dir, identityFile)
	}
	if ident.NodeID != id {
		return false, fmt.Errorf("data dir %s belongs to node %s, not %s", dir, ident.NodeID, id)
	}
	if ident.partitions() != partitions {
		return false, fmt.Errorf("data dir %s belongs to a cluster of %d partitions, not %d (the number of partitions is fixed when a cluster is bootstrapped)", dir, ident.partitions(), partitions)
	}
	return false, nil
}

// writeIdentity writes DATA/node.json durably (write, fsync, rename, fsync dir).
func writeIdentity(dir string, ident Identity) error {
	raw, err := json.Marshal(ident)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, identityFile+".tmp")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(raw, '\n')); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, identityFile)); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
