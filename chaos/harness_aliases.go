package chaos

import "github.com/dexhq/dex/chaos/harness"

// The harness moved to chaos/harness. These names stay here for the tests
// of other packages (cluster, cmd/dexd, the console's browser test) that
// still reach it through chaos; once they import chaos/harness, this file
// goes.

type (
	ClusterOptions = harness.ClusterOptions
	Node           = harness.Node
	Worker         = harness.Worker
	WorkerOptions  = harness.WorkerOptions
)

var (
	FreeAddr   = harness.FreeAddr
	FreeAddrs  = harness.FreeAddrs
	NewCluster = harness.NewCluster
	NewWorker  = harness.NewWorker
)
