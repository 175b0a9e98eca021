package chaos

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/dexhq/dex/api/wirerules"
	"github.com/dexhq/dex/chaos/harness"
)

// The takeover measurement of a partitioned cluster: kill k SIGKILLs the
// leader of partition k mod N. Beside the figures of one partition (kill →
// a surviving node names the partition's new leader, kill → a session of
// that partition created at once is idle), it times the turns of the
// partitions the killed node did not lead, before the kill and while its
// partitions are taken over: a kill must not stall them.

// otherTurns are the turns of the other partitions' sessions around one
// kill: created within the window before the kill, and during the
// takeover (from the kill until the killed partition's session is idle).
type otherTurns struct {
	Before, During []time.Duration
}

// partitionSession is a new session id of partition k.
func partitionSession(prefix string, k, partitions int) string {
	for i := 0; ; i++ {
		if id := fmt.Sprintf("%s-%d", prefix, i); wirerules.PartitionOf(id, partitions) == k {
			return id
		}
	}
}

// otherLoad runs sessions of the partitions in others back to back, two
// at a time, until stop closes, recording each turn with its start.
type otherLoad struct {
	mu    sync.Mutex
	turns []timedTurn
	err   error
	// done closes once every lane stopped, its last turn recorded.
	done chan struct{}
}

type timedTurn struct {
	at   time.Time
	took time.Duration
}

func (t *takeoverRun) runOtherLoad(prefix string, others []int, partitions int, stop <-chan struct{}) *otherLoad {
	l := &otherLoad{done: make(chan struct{})}
	var wg sync.WaitGroup
	for lane := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				k := others[(lane+n)%len(others)]
				id := partitionSession(fmt.Sprintf("%s-l%d-%d", prefix, lane, n), k, partitions)
				at := time.Now()
				took, err := t.sessionIdle(id, at)
				l.mu.Lock()
				if err != nil && l.err == nil {
					l.err = err
				}
				l.turns = append(l.turns, timedTurn{at, took})
				l.mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	go func() { wg.Wait(); close(l.done) }()
	return l
}

// split is the turns started within before of the kill at t0, and those
// started from t0 until end.
func (l *otherLoad) split(t0, end time.Time, before time.Duration) otherTurns {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out otherTurns
	for _, tt := range l.turns {
		switch {
		case tt.at.Before(t0) && tt.at.After(t0.Add(-before)):
			out.Before = append(out.Before, tt.took)
		case !tt.at.Before(t0) && tt.at.Before(end):
			out.During = append(out.During, tt.took)
		}
	}
	return out
}

// otherLoadWindow is how long the other partitions' turns are timed before
// each kill.
const otherLoadWindow = 3 * time.Second

// killPartition is kill for a partitioned cluster: the leader of
// partition k dies while the other partitions' sessions run.
func (t *takeoverRun) killPartition(i, k int) (Kill, otherTurns, error) {
	kill := Kill{N: i, Partition: k}
	partitions := t.cl.Partitions()
	wctx, cancel := context.WithTimeout(t.ctx, takeoverWait)
	leader, err := t.cl.WaitSpread(wctx, k)
	cancel()
	if err != nil {
		return kill, otherTurns{}, err
	}
	kill.Killed = leader.ID
	lctx, lcancel := context.WithTimeout(t.ctx, takeoverWait)
	leaders, err := t.cl.PartitionLeaders(lctx, leader)
	lcancel()
	if err != nil {
		return kill, otherTurns{}, err
	}
	var others []int
	for j, id := range leaders {
		if id != leader.ID {
			others = append(others, j)
		}
	}
	if len(others) == 0 {
		return kill, otherTurns{}, fmt.Errorf("%s leads every partition: nothing else to keep running", leader.ID)
	}
	stop := make(chan struct{})
	load := t.runOtherLoad(fmt.Sprintf("other-%d", i), others, partitions, stop)
	time.Sleep(otherLoadWindow)

	readyc := make(chan *harness.Node, 1)
	rctx, rcancel := context.WithTimeout(t.ctx, takeoverWait)
	defer rcancel()
	t0 := time.Now()
	leader.Kill()
	go func() {
		defer close(readyc)
		for rctx.Err() == nil {
			if n, err := t.cl.PartitionLeader(rctx, k); err == nil && n != leader {
				kill.Ready = time.Since(t0)
				readyc <- n
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	kill.Idle, err = t.sessionIdle(partitionSession(fmt.Sprintf("after-%d", i), k, partitions), t0)
	end := time.Now()
	close(stop)
	// A turn started during the takeover counts however long it takes:
	// the lanes finish the turns they are in before they are read.
	<-load.done
	if err != nil {
		return kill, otherTurns{}, err
	}
	n, ok := <-readyc
	if !ok {
		return kill, otherTurns{}, fmt.Errorf("no node but %s led partition %d within %s", leader.ID, k, takeoverWait)
	}
	kill.NewLeader = n.ID
	turns := load.split(t0, end, otherLoadWindow)
	load.mu.Lock()
	lerr := load.err
	load.mu.Unlock()
	if lerr != nil {
		return kill, turns, fmt.Errorf("a session of another partition: %w", lerr)
	}

	restarted := time.Now()
	if err := leader.Start(); err != nil {
		return kill, turns, fmt.Errorf("restart %s: %w", leader.ID, err)
	}
	wctx, cancel = context.WithTimeout(t.ctx, takeoverWait)
	_, err = t.cl.WaitSpread(wctx, k)
	cancel()
	if err != nil {
		return kill, turns, err
	}
	kill.CatchUp = time.Since(restarted)
	return kill, turns, nil
}

// otherSummary is the line of the other partitions' turns over every kill.
func otherSummary(target string, all []otherTurns) string {
	var before, during []time.Duration
	for _, o := range all {
		before = append(before, o.Before...)
		during = append(during, o.During...)
	}
	b, d := SpreadOf(before), SpreadOf(during)
	ratio := 0.0
	if b.P99 > 0 {
		ratio = float64(d.P99) / float64(b.P99)
	}
	return fmt.Sprintf("%-7s the other partitions' turns: before the kills %s (%d turns); during the takeovers %s (%d turns); p99 during/before %.2f",
		target, b, len(before), d, len(during), ratio)
}
