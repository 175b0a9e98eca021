// Package logstore holds a node's raft stores and the checks that keep them
// honest: the log in raft-wal's segment files (and its move out of an older
// raft.db), a CRC32C on every entry, the stored-up-to mark that finds a lost
// tail, the checks of raft.db's bolt pages and of the snapshot files, and
// the naming of a full disk. It knows nothing of a running node: the
// cluster opens the stores through it and decides what damage stops.
package logstore
