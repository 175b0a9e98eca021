package cluster_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// BenchmarkPropose commits CreateSession commands (a 100-byte message)
// through a 3-node cluster in this process, fsync on: one proposer at a time
// (commit latency, p50/p99) and 64 at once (committed entries per second,
// the load etcd's benchmark uses for its 3-node figure), once the leader
// commits in groups.
func BenchmarkPropose(b *testing.B) {
	message := string(make([]byte, 100))
	for _, proposers := range []int{1, 64} {
		b.Run(fmt.Sprintf("proposers=%d", proposers), func(b *testing.B) {
			c := newCluster(b, 3)
			for i := range c.nodes {
				c.start(i)
			}
			leader := c.readyLeader()
			for deadline := time.Now().Add(15 * time.Second); !leader.node.GroupCommit(); time.Sleep(50 * time.Millisecond) {
				if time.Now().After(deadline) {
					b.Fatal("the leader never started group commit")
				}
			}
			var next atomic.Int64
			lat := make([][]time.Duration, proposers)
			var wg sync.WaitGroup
			b.ResetTimer()
			for p := range proposers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for n := next.Add(1); n <= int64(b.N); n = next.Add(1) {
						start := time.Now()
						_, err := leader.node.Propose(context.Background(), &fsmpb.Command{Body: &fsmpb.Command_CreateSession{
							CreateSession: &fsmpb.CreateSession{SessionId: fmt.Sprintf("s%07d", n), MessageId: "m1", Message: message},
						}})
						if err != nil {
							b.Error(err)
							return
						}
						lat[p] = append(lat[p], time.Since(start))
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			all := slices.Concat(lat...)
			slices.Sort(all)
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "entries/s")
			b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
			for i := range c.nodes {
				c.stop(i)
			}
		})
	}
}
