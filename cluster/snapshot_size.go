package cluster

// LastSnapshot returns the size in bytes of the newest snapshot this node
// keeps on disk and the entry it is up to; ok is false when it keeps none
// (or its snapshot directory cannot be listed). It reads the snapshots'
// metadata files, not the snapshots.
func (n *Node) LastSnapshot() (size int64, index uint64, ok bool) {
	if n.snaps == nil {
		return 0, 0, false
	}
	metas, err := n.snaps.List()
	if err != nil || len(metas) == 0 {
		return 0, 0, false
	}
	return metas[0].Size, metas[0].Index, true
}
