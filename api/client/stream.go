package client

import (
	"context"
	"sync"
	"time"
	"unicode/utf8"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// Live output (docs/design/streaming.md): a model handler streams its
// output with ModelInput.Stream while it runs; the Worker sends it to the
// leader, which relays it to the session's watchers. The Worker keeps the
// attempt's whole output until the attempt ends, so that a new leader can
// ask for it again from any offset.

const (
	// maxAppend bounds the text of one AppendOutput call.
	maxAppend = 64 << 10
	// streamRetry is the pause before an append that failed is tried again.
	streamRetry = 100 * time.Millisecond
	// streamFlush bounds how long a finished handler's result waits for its
	// streamed output to reach the leader.
	streamFlush = 2 * time.Second
)

// outputStream is one attempt's live output on its way to the leader.
type outputStream struct {
	svc dexv1.WorkerServiceClient
	ref *dexv1.AttemptRef

	mu      sync.Mutex
	text    []byte // everything streamed so far
	held    uint64 // what the leader holds (its next offset)
	stopped bool   // the leader takes no more of it
	wake    chan struct{}
	synced  chan struct{} // signalled whenever held or stopped changes
	cancel  context.CancelFunc
	done    chan struct{} // nil until the first write starts the sender
}

func newOutputStream(svc dexv1.WorkerServiceClient, ref *dexv1.AttemptRef) *outputStream {
	return &outputStream{svc: svc, ref: ref, wake: make(chan struct{}, 1), synced: make(chan struct{}, 1)}
}

// write adds text to the output; the sender, started by the first write,
// picks it up.
func (s *outputStream) write(text string) {
	if text == "" {
		return
	}
	s.mu.Lock()
	if !s.stopped {
		s.text = append(s.text, text...)
	}
	if s.done == nil {
		ctx, cancel := context.WithCancel(context.Background())
		s.cancel, s.done = cancel, make(chan struct{})
		go s.run(ctx)
	}
	s.mu.Unlock()
	notify(s.wake)
}

func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// run sends what the leader does not hold yet, one call at a time.
func (s *outputStream) run(ctx context.Context) {
	defer close(s.done)
	for {
		s.mu.Lock()
		from, stopped := s.held, s.stopped
		chunk := s.text[min(from, uint64(len(s.text))):]
		if len(chunk) > maxAppend {
			chunk = chunk[:runeCut(chunk, maxAppend)]
		}
		s.mu.Unlock()
		if stopped || len(chunk) == 0 {
			select {
			case <-s.wake:
				continue
			case <-ctx.Done():
				return
			}
		}
		resp, err := s.svc.AppendOutput(ctx, &dexv1.AppendOutputRequest{Ref: s.ref, Offset: from, Text: string(chunk)})
		if err != nil {
			select {
			case <-time.After(streamRetry):
				continue
			case <-ctx.Done():
				return
			}
		}
		s.mu.Lock()
		s.held, s.stopped = min(resp.NextOffset, uint64(len(s.text))), s.stopped || resp.Stop
		s.mu.Unlock()
		notify(s.synced)
	}
}

// runeCut is where to cut b at most n bytes in so that no character is cut
// in two (a delta is a protobuf string: valid UTF-8).
func runeCut(b []byte, n int) int {
	for i := n; i > 0 && i > n-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			return i
		}
	}
	return n
}

// finish waits, up to wait, until the leader holds all the output (or takes
// no more of it), then stops the sender.
func (s *outputStream) finish(wait time.Duration) {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		done := s.stopped || s.held >= uint64(len(s.text))
		s.mu.Unlock()
		if done {
			break
		}
		select {
		case <-s.synced:
			continue
		case <-deadline.C:
		}
		break
	}
	s.stop()
}

// stop ends the sender without waiting for the leader (again: nothing).
func (s *outputStream) stop() {
	s.mu.Lock()
	s.stopped = true
	cancel, done := s.cancel, s.done
	s.mu.Unlock()
	if done != nil {
		cancel()
		<-done
	}
}

// Stream sends text, the next piece of the tool's progress, to the
// session's watchers as the handler runs, as ModelInput.Stream does for a
// model's output; the progress is not the tool's result, which the handler
// returns as usual. Without a Worker behind it, it does nothing.
func (c ToolCall) Stream(text string) {
	if c.out != nil {
		c.out.write(text)
	}
}

// Stream sends text, the next piece of the model's output, to the session's
// watchers as the handler produces it (docs/design/streaming.md). It does
// not wait for the cluster. The output the handler returns must be the
// concatenation of what it streamed (watchers are told when the committed
// result replaces the stream). Without a Worker behind it (a test's
// ModelInput), it does nothing.
func (in ModelInput) Stream(text string) {
	if in.out != nil {
		in.out.write(text)
	}
}
