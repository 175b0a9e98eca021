package client

import (
	"context"
	"strconv"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/metadata"
)

// PartitionMetadataKey is the request metadata that names the partition a
// PollTask polls ("0", "1", ...). A Worker sends it only when the cluster
// has more than one partition.
const PartitionMetadataKey = "dex-partition"

// poller is the state of one partition's poll loop.
type poller struct {
	partition int
	// conn is per loop: a partition whose leader is down is logged lost,
	// and back, on its own, whatever the other partitions do.
	conn connLog
}

// partitionCount is how many partitions the Worker polls (at least 1).
func (w *Worker) partitionCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.partitions
}

// partitionsChanged logs a new partition count and wakes pollPartitions.
func (w *Worker) partitionsChanged(first bool, was, now int) {
	if first {
		w.log.Info("polling every partition", zap.Int("partitions", now))
	} else {
		w.log.Info("the cluster's partition count changed; following it from the next poll",
			zap.Int("was", was), zap.Int("partitions", now))
	}
	if now > w.opts.Concurrency {
		w.log.Warn("fewer task slots than partitions: a partition is polled only while a slot is free",
			zap.Int("concurrency", w.opts.Concurrency), zap.Int("partitions", now))
	}
	select {
	case w.resized <- struct{}{}:
	default:
	}
}

// pollPartitions runs loop once per partition, each in its own goroutine,
// until ctx ends and every loop has returned. A loop returns by itself when
// its partition is gone; a new partition gets a loop when a registration
// reports it.
func (w *Worker) pollPartitions(ctx context.Context, loop func(p *poller)) {
	running := map[int]bool{}
	exited := make(chan int)
	for ctx.Err() == nil {
		for k := range w.partitionCount() {
			if !running[k] {
				running[k] = true
				go func() {
					loop(&poller{partition: k})
					exited <- k
				}()
			}
		}
		select {
		case <-w.resized:
		case k := <-exited:
			delete(running, k)
		case <-ctx.Done():
		}
	}
	for range len(running) {
		<-exited
	}
}

// slotsPerPoll is the most task slots one poll may ask for. With several
// partitions each loop asks for its share at most, so that a long poll of an
// idle partition does not hold every slot while another partition has work.
func (w *Worker) slotsPerPoll() int {
	return max(1, w.opts.Concurrency/w.partitionCount())
}

// toPartition is the context and logger for one PollTask of p, or !ok when
// p's partition is gone. With one partition they are ctx and the Worker's
// logger, unchanged.
func (w *Worker) toPartition(ctx context.Context, p *poller) (_ context.Context, _ *zap.Logger, ok bool) {
	n := w.partitionCount()
	switch {
	case p.partition >= n:
		return nil, nil, false
	case n == 1:
		return ctx, w.log, true
	}
	ctx = toPartitionNumber(ctx, p.partition)
	return metadata.AppendToOutgoingContext(ctx, PartitionMetadataKey, strconv.Itoa(p.partition)),
		w.log.With(zap.Int("partition", p.partition)), true
}

// sharedSlotWait is how long a poll waits when there are fewer task slots
// than partitions: a poll holds its slot while it waits, so the loops take
// turns with short polls and no partition waits a whole PollWait behind
// an idle one.
const sharedSlotWait = 250 * time.Millisecond

// pollWait is how long one PollTask waits for work.
func (w *Worker) pollWait() time.Duration {
	if w.partitionCount() > w.opts.Concurrency {
		return min(w.opts.PollWait, sharedSlotWait)
	}
	return w.opts.PollWait
}

// outputSender is the sender of the live output of partition k's attempts.
func (w *Worker) outputSender(k int) *outputSender {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.outputs == nil {
		w.outputs = map[int]*outputSender{}
	}
	s := w.outputs[k]
	if s == nil {
		to := func(ctx context.Context) context.Context {
			if ctx, _, ok := w.toPartition(ctx, &poller{partition: k}); ok {
				return ctx
			}
			return ctx
		}
		s = &outputSender{svc: w.svc, to: to, spacing: streamSpacing, pending: map[*outputStream]struct{}{}}
		w.outputs[k] = s
	}
	return s
}
