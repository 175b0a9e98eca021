//go:build chaos

package logstore

import gofail "go.etcd.io/gofail/runtime"

// slowDisk is evaluated before each write of log entries (a `sleep(ms)`
// term makes this node's disk slow); its name is FailpointSlowDisk of the
// chaos harness.
var slowDisk = gofail.NewFailpoint("dexBeforeStoreLogs")

func beforeStoreLogs() { _, _ = slowDisk.Acquire() }
