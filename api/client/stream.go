package client

import (
	"context"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// Live output (docs/design/streaming.md): a model handler streams its
// output with ModelInput.Stream while it runs; the Worker sends it to the
// leader, which relays it to the session's watchers. The Worker keeps the
// attempt's whole output until the attempt ends, so that a new leader can
// ask for it again from any offset. One sender per partition carries the
// pending output of every attempt the Worker runs there, one AppendOutputs
// call at a time: what is streamed while a call is in flight goes in the
// next one, so the calls grow with the Workers, not with the deltas.

const (
	// maxAppend bounds the text of one attempt in one call; maxBatch the
	// text of one call, and maxBatchAppends its attempts (the cluster takes
	// at most 1,024).
	maxAppend       = 64 << 10
	maxBatch        = 1 << 20
	maxBatchAppends = 256
	// streamRetry is the pause before a call that failed is tried again.
	streamRetry = 100 * time.Millisecond
	// streamCallTimeout bounds one call.
	streamCallTimeout = 10 * time.Second
	// streamFlush bounds how long a finished handler's result waits for its
	// streamed output to reach the leader.
	streamFlush = 2 * time.Second
	// streamSpacing is the least time between the starts of two calls when
	// output is waiting as a call returns (the Worker streams faster than
	// the leader answers): the next call then carries what a few
	// milliseconds more brought, and the leader relays it to the watchers
	// at once, so that its sends to them share writes. An idle sender sends
	// at once.
	streamSpacing = 10 * time.Millisecond
)

// outputSender sends the live output of a Worker's attempts of one
// partition. Its goroutine runs while some attempt has output the leader
// does not hold.
type outputSender struct {
	svc dexv1.WorkerServiceClient
	// to marks a call's context with the sender's partition.
	to func(context.Context) context.Context

	// spacing is streamSpacing (a test's own).
	spacing time.Duration

	mu      sync.Mutex
	pending map[*outputStream]struct{} // with output the leader does not hold
	running bool
}

// outputStream is one attempt's live output on its way to the leader; its
// fields are guarded by its sender's mu.
type outputStream struct {
	sender *outputSender
	ref    *dexv1.AttemptRef

	text    []byte        // everything streamed so far
	held    uint64        // what the leader holds (its next offset)
	stopped bool          // the leader takes no more of it, or the attempt is over
	synced  chan struct{} // signalled whenever held or stopped changes
}

func (s *outputSender) open(ref *dexv1.AttemptRef) *outputStream {
	return &outputStream{sender: s, ref: ref, synced: make(chan struct{}, 1)}
}

// write adds text to the output for the sender to pick up.
func (o *outputStream) write(text string) {
	if text == "" {
		return
	}
	s := o.sender
	s.mu.Lock()
	defer s.mu.Unlock()
	if o.stopped {
		return
	}
	o.text = append(o.text, text...)
	s.pending[o] = struct{}{}
	if !s.running {
		s.running = true
		go s.run()
	}
}

func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// run sends what the leader does not hold, one call at a time, until
// nothing is pending; a call that follows another at once waits until
// spacing has passed since the other started.
func (s *outputSender) run() {
	var last time.Time
	for {
		if !last.IsZero() {
			s.mu.Lock()
			idle := len(s.pending) == 0
			s.mu.Unlock()
			if wait := time.Until(last.Add(s.spacing)); !idle && wait > 0 {
				time.Sleep(wait)
			}
		}
		s.mu.Lock()
		batch, req := s.batch()
		if len(batch) == 0 {
			s.running = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		last = time.Now()
		ctx, cancel := context.WithTimeout(s.to(context.Background()), streamCallTimeout)
		resp, err := s.svc.AppendOutputs(ctx, req)
		cancel()
		if err == nil && len(resp.Answers) != len(batch) {
			err = fmt.Errorf("the cluster answered %d appends of %d", len(resp.Answers), len(batch))
		}
		if err != nil {
			time.Sleep(streamRetry)
			continue
		}
		s.mu.Lock()
		for i, o := range batch {
			o.took(resp.Answers[i])
		}
		s.mu.Unlock()
	}
}

// batch is the next call: each pending attempt's output from the offset
// the leader holds, within the call's bounds. It forgets the attempts that
// stopped or are held whole. s.mu is held.
func (s *outputSender) batch() ([]*outputStream, *dexv1.AppendOutputsRequest) {
	var batch []*outputStream
	req := &dexv1.AppendOutputsRequest{}
	size := 0
	for o := range s.pending {
		from := min(o.held, uint64(len(o.text)))
		if o.stopped || from == uint64(len(o.text)) {
			delete(s.pending, o)
			continue
		}
		if len(batch) == maxBatchAppends || size >= maxBatch {
			break
		}
		chunk := o.text[from:]
		if n := min(maxAppend, maxBatch-size); len(chunk) > n {
			chunk = chunk[:runeCut(chunk, n)]
		}
		if len(chunk) == 0 {
			break // less room left in the call than the next character
		}
		batch = append(batch, o)
		req.Appends = append(req.Appends, &dexv1.AppendOutputRequest{Ref: o.ref, Offset: from, Text: string(chunk)})
		size += len(chunk)
	}
	return batch, req
}

// took applies the leader's answer to an append. The sender's mu is held.
func (o *outputStream) took(a *dexv1.AppendOutputResponse) {
	o.held, o.stopped = min(a.NextOffset, uint64(len(o.text))), o.stopped || a.Stop
	if o.stopped || o.held == uint64(len(o.text)) {
		delete(o.sender.pending, o)
	}
	notify(o.synced)
}

// runeCut is where to cut b at most n bytes in so that no character is cut
// in two (a delta is a protobuf string: valid UTF-8); 0 when the first
// character is longer than n.
func runeCut(b []byte, n int) int {
	for i := n; i > 0 && i > n-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			return i
		}
	}
	return 0
}

// finish waits, up to wait, until the leader holds all the output (or takes
// no more of it), then stops sending it.
func (o *outputStream) finish(wait time.Duration) {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		o.sender.mu.Lock()
		done := o.stopped || o.held >= uint64(len(o.text))
		o.sender.mu.Unlock()
		if done {
			break
		}
		select {
		case <-o.synced:
			continue
		case <-deadline.C:
		}
		break
	}
	o.stop()
}

// stop ends the attempt's output without waiting for the leader (again:
// nothing). A call in flight may still carry it.
func (o *outputStream) stop() {
	o.sender.mu.Lock()
	defer o.sender.mu.Unlock()
	o.stopped = true
	delete(o.sender.pending, o)
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
