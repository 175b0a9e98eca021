package soak

import (
	"github.com/dexhq/dex/chaos/harness"
)

// The soak's partitions go through the harness's per-link raft proxies
// (netfault.go): every cluster of a soak is built with them.
func init() {
	soakNetwork = func(o *harness.ClusterOptions) func(*harness.Cluster) Net {
		o.NetFaults = true
		return func(c *harness.Cluster) Net {
			if n := c.Net(); n != nil {
				return n
			}
			return nil
		}
	}
}
