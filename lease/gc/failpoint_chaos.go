//go:build chaos

package gc

import gofail "go.etcd.io/gofail/runtime"

// archiveWritten is evaluated after a batch of sessions was written to the
// archive and before their delete is proposed; its name is
// FailpointAfterArchiveWrite of the chaos harness.
var archiveWritten = gofail.NewFailpoint("dexAfterArchiveWrite")

func afterArchiveWrite() { _, _ = archiveWritten.Acquire() }
