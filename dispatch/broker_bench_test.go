package dispatch

import (
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

type emptyState struct{ f *fsm.FSM }

func (e emptyState) State() *fsm.State { return e.f.State() }

// BenchmarkBrokerTake is the broker alone, without the state machine: one
// take from n ready Steps across n sessions, then the Step is queued again.
// Its cost grows with log n at most.
func BenchmarkBrokerTake(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("ready=%d", n), func(b *testing.B) {
			br := newBroker(emptyState{fsm.New(fsm.Options{})}, 0, time.Now, zap.NewNop(), nil)
			br.mu.Lock()
			for i := range n {
				br.pushReady(&fsmpb.Step{
					Id: fmt.Sprintf("st%d", i), SessionId: fmt.Sprintf("s%d", i), QueueSeq: uint64(i + 1),
					Kind: fsmpb.StepKind_STEP_KIND_RUN_MODEL,
				}, false)
			}
			br.mu.Unlock()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				steps, _, err := br.take(modelKeys, 1, nil, false)
				if err != nil || len(steps) != 1 {
					b.Fatalf("take: %d, %v", len(steps), err)
				}
				br.mu.Lock()
				delete(br.inflight, steps[0].Id)
				br.pushReady(steps[0], false)
				br.mu.Unlock()
			}
		})
	}
}
