package chaos

// The soak's partitions go through the harness's per-link raft proxies
// (netfault.go): every cluster of a soak is built with them.
func init() {
	soakNetwork = func(o *ClusterOptions) func(*Cluster) SoakNet {
		o.NetFaults = true
		return func(c *Cluster) SoakNet {
			if n := c.Net(); n != nil {
				return n
			}
			return nil
		}
	}
}
