package fsm

import (
	"crypto/sha256"
	"encoding/binary"
	"strings"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// A turn started by a traced call is one trace (docs/tracing.md): its
// messages, the turn and its Steps keep the caller's trace context, and
// each entry that ends a turn, a Step or an attempt of it reports a
// TracedSpan in Applied for the leader to export. The span ids are derived
// from the trace and the record's identity, so whichever leader applies an
// end exports the span under the id the Worker was given, across takeovers.

// SpanKind is what a TracedSpan covers.
type SpanKind uint8

const (
	SpanTurn SpanKind = iota + 1
	SpanStep
	SpanAttempt
)

// TracedSpan is one finished span of a traced turn, as the entry that ended
// it recorded it. Times are the commands' (Unix ms).
type TracedSpan struct {
	Kind      SpanKind
	Trace     *fsmpb.TraceContext
	SessionID string
	Turn      uint64
	// Step: its id, kind and tool; Attempt: the Step's, and the attempt.
	StepID   string
	StepKind fsmpb.StepKind
	Tool     string
	Attempt  uint32
	Worker   string
	// StartMs and EndMs bound the span; ClaimedMs is an attempt's claim.
	StartMs, EndMs, ClaimedMs int64
	// Status: how it ended (a turn's "completed", "failed", "cancelled" or
	// "dropped"; a Step's outcome; an attempt's status); Error, why it failed.
	Status string
	Error  string
	Failed bool
}

// TurnSpanID, StepSpanID and AttemptSpanID are the span ids of a traced
// turn, Step and attempt: the first 8 bytes of a SHA-256 over the trace id
// and the record's identity (never all zero, which W3C forbids).
func TurnSpanID(trace *fsmpb.TraceContext, session string, turn uint64) [8]byte {
	return spanID(trace, "turn", session, turn)
}

func StepSpanID(trace *fsmpb.TraceContext, step string) [8]byte {
	return spanID(trace, "step", step, 0)
}

func AttemptSpanID(trace *fsmpb.TraceContext, step string, n uint32) [8]byte {
	return spanID(trace, "attempt", step, uint64(n))
}

func spanID(trace *fsmpb.TraceContext, what, id string, n uint64) [8]byte {
	h := sha256.New()
	h.Write(trace.GetTraceId())
	h.Write([]byte(what))
	h.Write([]byte{0})
	h.Write([]byte(id))
	h.Write(binary.BigEndian.AppendUint64(nil, n))
	var out [8]byte
	copy(out[:], h.Sum(nil))
	if out == [8]byte{} {
		out[7] = 1
	}
	return out
}

// ValidTrace is a trace context a command may carry: a 16-byte trace id
// and an 8-byte span id, neither all zero. Anything else is dropped, not
// refused: tracing never fails a call.
func ValidTrace(t *fsmpb.TraceContext) *fsmpb.TraceContext {
	if len(t.GetTraceId()) != 16 || len(t.GetSpanId()) != 8 || allZero(t.TraceId) || allZero(t.SpanId) {
		return nil
	}
	return t.CloneVT()
}

func attemptStatusName(s fsmpb.AttemptStatus) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "ATTEMPT_STATUS_"))
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// traced records a span for the leader to export.
func (t *touched) traced(s TracedSpan) {
	t.spans = append(t.spans, s)
}

// turnEnded reports the end of a traced turn (how: completed, failed,
// cancelled, dropped).
func (a *applier) turnEnded(s *fsmpb.Session, t *fsmpb.Turn, how string) {
	if t.GetTrace() == nil {
		return
	}
	span := TracedSpan{
		Kind: SpanTurn, Trace: t.Trace, SessionID: s.Id, Turn: t.Number,
		StartMs: t.StartedAtMs, EndMs: a.now, Status: how, Failed: how != "completed",
	}
	if span.Failed {
		span.Error = s.LastError
	}
	a.touched.traced(span)
}

// stepTraced reports the end of a traced Step.
func (a *applier) stepTraced(st *fsmpb.Step) {
	if st.Trace == nil {
		return
	}
	a.touched.traced(TracedSpan{
		Kind: SpanStep, Trace: st.Trace, SessionID: st.SessionId, Turn: st.Turn,
		StepID: st.Id, StepKind: st.Kind, Tool: st.Tool,
		StartMs: st.CreatedAtMs, EndMs: st.EndedAtMs, Status: OutcomeName(st.Outcome), Failed: st.IsError,
	})
}

// attemptTraced reports the end of an attempt of a traced Step.
func (a *applier) attemptTraced(st *fsmpb.Step, at *fsmpb.Attempt) {
	if st.Trace == nil {
		return
	}
	a.touched.traced(TracedSpan{
		Kind: SpanAttempt, Trace: st.Trace, SessionID: st.SessionId, Turn: st.Turn,
		StepID: st.Id, StepKind: st.Kind, Tool: st.Tool, Attempt: at.N, Worker: at.WorkerId,
		StartMs: at.StartedAtMs, EndMs: at.EndedAtMs, ClaimedMs: at.ClaimedAtMs,
		Status: attemptStatusName(at.Status), Error: at.Error,
		Failed: at.Status != fsmpb.AttemptStatus_ATTEMPT_STATUS_SUCCEEDED,
	})
}
