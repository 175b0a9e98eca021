package client

import (
	"context"
	"math/rand/v2"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// LeaderMetadataKey is the trailer in which a follower names the leader's
// gRPC address when it answers Unavailable.
const LeaderMetadataKey = "dex-leader"

// backoff grows from min to max with jitter.
type backoff struct {
	min, max time.Duration
	n        int
}

func newBackoff() *backoff { return &backoff{min: 50 * time.Millisecond, max: 2 * time.Second} }

func (b *backoff) next() time.Duration {
	d := b.min << min(b.n, 16)
	if d > b.max || d <= 0 {
		d = b.max
	}
	b.n++
	// ±20% jitter so Workers do not hit a new leader in lockstep.
	j := time.Duration(rand.Int64N(int64(d)/5 + 1))
	if rand.IntN(2) == 0 {
		return d - j
	}
	return d + j
}

func (b *backoff) reset() { b.n = 0 }

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// transient reports whether err leaves a retry of an idempotent call worth
// trying: the cluster could not be reached, was changing leader, or the
// attempt ran out of its own time while the caller's ctx is still alive.
func transient(ctx context.Context, err error) bool {
	if err == nil || ctx.Err() != nil {
		return false
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.Aborted, codes.DeadlineExceeded:
		return true
	case codes.Canceled:
		// Canceled while our ctx is alive: the server cancelled (e.g. a
		// proposal abandoned when the node lost leadership).
		return true
	}
	return false
}

// notApplied reports whether err is a follower's (or a not-yet-ready
// leader's) refusal: Unavailable naming a leader, so nothing was changed and
// even a call that is not idempotent may be repeated.
func notApplied(err error, trailer metadata.MD) bool {
	if status.Code(err) != codes.Unavailable {
		return false
	}
	return len(trailer.Get(LeaderMetadataKey)) > 0
}
