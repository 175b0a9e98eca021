package server

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/lease/stream"
)

// OutputHubs gives the leader's hub of live output (nil off the leader;
// docs/design/streaming.md).
type OutputHubs interface {
	Hub() *stream.Hub
}

// maxAppends bounds the appends of one AppendOutputs call.
const maxAppends = 1024

// AppendOutput takes a running attempt's live output and relays it to the
// session's watchers. An attempt that no longer runs, or output over the
// limit, is answered with stop: its result carries the output whole.
func (w *Workers) AppendOutput(ctx context.Context, req *dexv1.AppendOutputRequest) (*dexv1.AppendOutputResponse, error) {
	resp, err := w.AppendOutputs(ctx, &dexv1.AppendOutputsRequest{Appends: []*dexv1.AppendOutputRequest{req}})
	if err != nil {
		return nil, err
	}
	return resp.Answers[0], nil
}

// AppendOutputs is AppendOutput for several attempts of this partition at
// once. A malformed append refuses the whole call, and nothing is taken.
func (w *Workers) AppendOutputs(ctx context.Context, req *dexv1.AppendOutputsRequest) (*dexv1.AppendOutputsResponse, error) {
	if err := w.checkAttempt(ctx); err != nil {
		return nil, err
	}
	if err := validAppends(req.Appends); err != nil {
		return nil, err
	}
	var hub *stream.Hub
	if w.outputs != nil {
		hub = w.outputs.Hub()
	}
	if hub == nil {
		return nil, status.Error(codes.Unavailable, "this node holds no live output now (it is not leading); try again")
	}
	state := w.node.State()
	resp := &dexv1.AppendOutputsResponse{Answers: make([]*dexv1.AppendOutputResponse, len(req.Appends))}
	for i, a := range req.Appends {
		answer, err := appendOutput(hub, state.Step(a.Ref.StepId), a)
		if err != nil {
			return nil, err
		}
		resp.Answers[i] = answer
	}
	return resp, nil
}

// validAppends refuses a call of no append, of too many, of an append
// without its attempt, or of the same attempt twice (its offsets would race).
func validAppends(appends []*dexv1.AppendOutputRequest) error {
	if len(appends) == 0 || len(appends) > maxAppends {
		return status.Errorf(codes.InvalidArgument, "appends: %d given, 1 to %d taken", len(appends), maxAppends)
	}
	seen := make(map[stream.Key]bool, len(appends))
	for i, a := range appends {
		if err := validRef(a.Ref); err != nil {
			if len(appends) == 1 {
				return err
			}
			return status.Errorf(codes.InvalidArgument, "append %d: %s", i, status.Convert(err).Message())
		}
		k := stream.Key{Step: a.Ref.StepId, Attempt: a.Ref.Attempt}
		if seen[k] {
			return status.Errorf(codes.InvalidArgument, "append %d: attempt %d of Step %s is appended to twice in one call", i, k.Attempt, k.Step)
		}
		seen[k] = true
	}
	return nil
}

// appendOutput takes one append of the Step st (nil: not in this
// partition's state).
func appendOutput(hub *stream.Hub, st *fsmpb.Step, a *dexv1.AppendOutputRequest) (*dexv1.AppendOutputResponse, error) {
	if !runningAttempt(st, a.Ref) {
		return &dexv1.AppendOutputResponse{Stop: true}, nil
	}
	next, err := hub.Append(st.SessionId, stream.Key{Step: st.Id, Attempt: a.Ref.Attempt}, a.Offset, a.Text)
	switch {
	case errors.Is(err, stream.ErrOverLimit), errors.Is(err, stream.ErrEnded):
		return &dexv1.AppendOutputResponse{NextOffset: next, Stop: true}, nil
	case err != nil:
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	return &dexv1.AppendOutputResponse{NextOffset: next}, nil
}

// runningAttempt reports whether ref names the Step's current attempt, with
// its token, and it still runs.
func runningAttempt(st *fsmpb.Step, ref *dexv1.AttemptRef) bool {
	if st == nil || ref.Attempt == 0 || int(ref.Attempt) != len(st.Attempts) {
		return false
	}
	at := st.Attempts[ref.Attempt-1]
	return at.Token == ref.Token && at.Status == fsmpb.AttemptStatus_ATTEMPT_STATUS_RUNNING
}

// liveOutput is a watch's subscription to the live output, when it asked for
// it and this node leads the session's partition (nil otherwise).
func (s *Sessions) liveOutput(req *dexv1.WatchSessionRequest) *stream.Watcher {
	if !req.LiveOutput || s.outputs == nil {
		return nil
	}
	hub := s.outputs.Hub()
	if hub == nil {
		return nil
	}
	from := map[stream.Key]uint64{}
	for _, o := range req.OutputOffsets {
		from[stream.Key{Step: o.StepId, Attempt: o.Attempt}] = o.Offset
	}
	return hub.Watch(req.SessionId, from)
}

// outputEvent is a live output delta as a watch sends it.
func outputEvent(d stream.Delta) *dexv1.Event {
	var kind string
	switch d.Kind {
	case stream.Text:
		kind = "output"
	case stream.Ended:
		kind = "output_ended"
	case stream.Abandoned:
		kind = "output_abandoned"
	}
	return &dexv1.Event{SessionId: d.Session, Type: kind, StepId: d.Step, Output: &dexv1.OutputDelta{Attempt: d.Attempt, Offset: d.Offset, Text: d.Text}}
}

// liveEnded is how a watch ends when its live output stopped: the watcher
// fell behind, or this node's leadership ended. Either way the client
// watches again with the offsets it holds.
func liveEnded(w *stream.Watcher) error {
	if w.Behind() {
		return status.Error(codes.ResourceExhausted, "the watch fell behind the live output; watch again with the output offsets you hold")
	}
	return status.Error(codes.Unavailable, "the leader of this session changed; watch again with the output offsets you hold")
}
