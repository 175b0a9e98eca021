// Package peer is how a node talks raft to its peers: the transport whose
// every connection opens with the cluster handshake (each side names its
// cluster, so a node of another cluster is refused before raft reads a
// byte), mutual TLS under it, the filter that answers vote requests that
// break the membership rules before they reach raft, and the probes a node
// makes of a peer's raft port. It knows nothing of a running node: the
// cluster gives it the raft to check votes against and decides what a
// learnt cluster id means.
package peer
