package cluster

import "github.com/dexhq/dex/cluster/internal/logstore"

// The raft stores and their integrity checks live in internal/logstore;
// these are the names of its errors that Dex's callers see.

// DamageError is a log entry (or a store) whose bytes are not what was
// written. The node must stop: serving or voting on it could diverge from
// its peers.
type DamageError = logstore.DamageError

// DiskFullError is a write to the data dir that its filesystem refused for
// lack of space or quota. The data dir is not damaged.
type DiskFullError = logstore.DiskFullError

// IsDiskFull reports whether err is, underneath its wrapping, a write refused
// for lack of space (ENOSPC) or quota (EDQUOT).
func IsDiskFull(err error) bool { return logstore.IsDiskFull(err) }
