package client

import (
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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
