package lease

import (
	"context"
	"sync"
)

// Term is one establishment of a leader service under a dispatch epoch. Its
// context ends when the term is closed, and closing waits for every piece of
// work started in it (Go) or entered into it (Enter), so nothing of the term
// proposes after Close returns.
type Term struct {
	// Epoch is the dispatch epoch the term was opened for: every command
	// the service proposes in it carries it, so a deposed leader's are
	// refused.
	Epoch  uint64
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// Context ends when the term is closed.
func (t *Term) Context() context.Context { return t.ctx }

// Go runs f in the term: Close waits for it. Once the term is closed it runs
// nothing and returns false.
func (t *Term) Go(f func()) bool {
	if !t.Enter() {
		return false
	}
	go func() {
		defer t.Leave()
		f()
	}()
	return true
}

// Enter counts one piece of work (a poll, a proposal) that Close waits for;
// false when the term is closed. Leave ends it.
func (t *Term) Enter() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.wg.Add(1)
	return true
}

// Leave ends a piece of work Enter counted.
func (t *Term) Leave() { t.wg.Done() }

func (t *Term) close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.cancel()
	t.wg.Wait()
}

// Fence is the one epoch-fenced start and stop of a leader service: it holds
// the service's open term, opens a new one for an epoch (closing the old
// one first) and closes it. Every leader-only service keeps its term in
// one; none writes its own cancel, done channel and wait.
type Fence struct {
	turn sync.Mutex // Open and Close do not overlap

	mu  sync.Mutex // guards cur only: services read it under their own locks
	cur *Term
}

// Open closes the open term, if any, and opens one for epoch. The term's
// context is not ctx's: it lives until Close, whatever the caller's.
func (f *Fence) Open(epoch uint64) *Term {
	f.turn.Lock()
	defer f.turn.Unlock()
	f.closeLocked(nil)
	ctx, cancel := context.WithCancel(context.Background())
	t := &Term{Epoch: epoch, ctx: ctx, cancel: cancel}
	f.mu.Lock()
	f.cur = t
	f.mu.Unlock()
	return t
}

// Close closes the open term and returns it (nil when none was open).
// dropped, when set, runs once the term is no longer current but before it
// ends: a service forgets its term's state there. Nothing started in the
// term runs after Close returns.
func (f *Fence) Close(dropped func()) *Term {
	f.turn.Lock()
	defer f.turn.Unlock()
	return f.closeLocked(dropped)
}

func (f *Fence) closeLocked(dropped func()) *Term {
	f.mu.Lock()
	t := f.cur
	f.cur = nil
	f.mu.Unlock()
	if t == nil {
		return nil
	}
	if dropped != nil {
		dropped()
	}
	t.close()
	return t
}

// Current is the open term (nil when none). Holding it is no promise it
// stays open: compare it again under the service's lock, or Enter it.
func (f *Fence) Current() *Term {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cur
}

// Enter returns the open term with one piece of work entered in it (Leave
// ends it), or nil when no term is open.
func (f *Fence) Enter() *Term {
	f.mu.Lock()
	t := f.cur
	f.mu.Unlock()
	if t == nil || !t.Enter() {
		return nil
	}
	return t
}

// Epoch is the open term's epoch (0 when none is open).
func (f *Fence) Epoch() uint64 {
	if t := f.Current(); t != nil {
		return t.Epoch
	}
	return 0
}
