package cluster

// InFlightCount is how many of the node's proposals raft has not answered.
func (n *Node) InFlightCount() int {
	n.inFlight.mu.Lock()
	defer n.inFlight.mu.Unlock()
	return len(n.inFlight.cmds)
}
