package client

import (
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// EventsNotKeptError says that a watch's next events were dropped by the
// cluster's event retention: the events after After up to ResumeAfter are
// lost, and FirstKept is the first event still kept (0 when none is kept
// now). Watching again after ResumeAfter delivers every event kept.
type EventsNotKeptError struct {
	SessionID   string
	After       uint64
	ResumeAfter uint64
	FirstKept   uint64
}

func (e *EventsNotKeptError) Error() string {
	first := "no event of it is kept now"
	if e.FirstKept != 0 {
		first = fmt.Sprintf("the first kept is %d", e.FirstKept)
	}
	return fmt.Sprintf("events of session %s after %d up to %d are no longer kept (event retention); %s",
		e.SessionID, e.After, e.ResumeAfter, first)
}

// WatchOption configures WatchSession.
type WatchOption func(*watchOptions)

type watchOptions struct {
	onNotKept func(EventsNotKeptError) error
	live      *liveOffsets // nil: no live output
}

// WithLiveOutput makes WatchSession deliver the running attempts' live
// output too (docs/design/streaming.md): events of seq 0 and type "output"
// (Event.Output: the attempt, the offset, the text), "output_ended" (the
// committed result replaces the stream) and "output_abandoned" (the attempt
// failed; its retry streams afresh). Across reconnections, a takeover
// included, the watch resumes each attempt's output from where it was: every
// byte once, in order, and each attempt's end (ended or abandoned) once.
func WithLiveOutput() WatchOption {
	return func(o *watchOptions) { o.live = newLiveOffsets() }
}

type liveKey struct {
	step    string
	attempt uint32
}

// liveOffsets is how far the watch delivered each attempt's output, and
// which attempts' ends it delivered. An ended attempt keeps its offset: one
// missing from the request is sent again from 0. The server may tell a
// resumed watch an end again (it replays a held attempt's end, or tells it
// from the state), so ended drops the repeat.
type liveOffsets struct {
	held  map[liveKey]uint64
	ended map[liveKey]bool
}

func newLiveOffsets() *liveOffsets {
	return &liveOffsets{held: map[liveKey]uint64{}, ended: map[liveKey]bool{}}
}

// request is where to resume each attempt's output.
func (l *liveOffsets) request() []*dexv1.OutputOffset {
	out := make([]*dexv1.OutputOffset, 0, len(l.held))
	for k, off := range l.held {
		out = append(out, &dexv1.OutputOffset{StepId: k.step, Attempt: k.attempt, Offset: off})
	}
	return out
}

// trim is e as it is still to be delivered: an output delta without the
// bytes already delivered, an attempt's end the first time only (nil:
// nothing new).
func (l *liveOffsets) trim(e *dexv1.Event) *dexv1.Event {
	o := e.Output
	k := liveKey{e.StepId, o.Attempt}
	switch e.Type {
	case "output":
	case "output_ended", "output_abandoned":
		if l.ended[k] {
			return nil
		}
		l.ended[k] = true
		return e
	default:
		return e
	}
	held := l.held[k]
	end := o.Offset + uint64(len(o.Text))
	if end <= held {
		return nil
	}
	if o.Offset < held {
		e = proto.Clone(e).(*dexv1.Event)
		e.Output.Text = o.Text[held-o.Offset:]
		e.Output.Offset = held
	}
	l.held[k] = end
	return e
}

// OnEventsNotKept makes WatchSession resume from the first kept event when
// the events it was about to deliver were dropped, after telling f which
// were lost. An error from f ends the watch with that error.
func OnEventsNotKept(f func(EventsNotKeptError) error) WatchOption {
	return func(o *watchOptions) { o.onNotKept = f }
}

// eventsNotKept reads a WatchSession OutOfRange answer, or returns nil.
func eventsNotKept(err error) *EventsNotKeptError {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.OutOfRange {
		return nil
	}
	for _, d := range st.Details() {
		if v, ok := d.(*dexv1.EventsNotKept); ok {
			return &EventsNotKeptError{SessionID: v.SessionId, After: v.AfterSeq, ResumeAfter: v.ResumeAfterSeq, FirstKept: v.FirstKeptSeq}
		}
	}
	return nil
}
