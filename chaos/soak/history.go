package soak

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"sort"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The soak's log of client calls: every call with the moment it was made,
// the moment its answer came and the answer, as the checker reads it.

// Operation kinds of the client history.
const (
	OpCreate  = "create"  // CreateSession with a first message (Key)
	OpSend    = "send"    // SendMessage (Key)
	OpRead    = "read"    // GetSession, the whole session
	OpResolve = "resolve" // ResolveApproval or AnswerQuestion (Step)
	OpWatch   = "watch"   // WatchSession from the start for a while
	OpClose   = "close"   // CloseSession (lifecycle mode)
)

// Answers of a call.
const (
	AnsOK      = "ok"
	AnsUnknown = "unknown" // no answer or a transient error: it may or may not have happened
	AnsRefused = "refused" // a definite refusal: nothing changed
)

// Op is one client call and its answer.
type Op struct {
	Client  int    `json:"client"`
	Kind    string `json:"kind"`
	Session string `json:"session"`
	Key     string `json:"key,omitempty"`
	Step    string `json:"step,omitempty"`
	// Call and Return: nanoseconds since the soak started.
	Call   int64  `json:"call"`
	Return int64  `json:"return"`
	Answer string `json:"answer"`
	Code   string `json:"code,omitempty"` // the gRPC code of an error
	Err    string `json:"err,omitempty"`
	// A send the cluster reported as already seen.
	Duplicate bool `json:"duplicate,omitempty"`

	// A read's answer: the message ids it saw (history and inbox, sorted),
	// the history's length, the session's last event seq, turns completed,
	// the approval and question Steps already done (sorted) and the status.
	Keys       []string `json:"keys,omitempty"`
	HistoryLen uint64   `json:"history_len,omitempty"`
	EventSeq   uint64   `json:"event_seq,omitempty"`
	Turns      uint64   `json:"turns,omitempty"`
	Done       []string `json:"done,omitempty"`
	Status     string   `json:"status,omitempty"`

	// A watch's answer: the highest seq it got, and a gap or disorder in
	// the seqs it got, if any.
	WatchMax uint64 `json:"watch_max,omitempty"`
	WatchGap string `json:"watch_gap,omitempty"`
}

// Recorder collects the history; safe for concurrent clients.
type Recorder struct {
	start time.Time
	mu    sync.Mutex
	ops   []Op
}

// NewRecorder starts the history's clock.
func NewRecorder() *Recorder { return &Recorder{start: time.Now()} }

// Begin stamps the call of op.
func (r *Recorder) Begin(op *Op) { op.Call = time.Since(r.start).Nanoseconds() }

// End stamps the answer (classified from err) and records op.
func (r *Recorder) End(op *Op, err error) {
	op.Return = time.Since(r.start).Nanoseconds()
	op.Answer, op.Code, op.Err = classify(err)
	r.mu.Lock()
	r.ops = append(r.ops, *op)
	r.mu.Unlock()
}

// Ops returns a copy of the history in the order of the calls.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	out := append([]Op(nil), r.ops...)
	r.mu.Unlock()
	sort.SliceStable(out, func(i, j int) bool { return out[i].Call < out[j].Call })
	return out
}

// classify sorts an answer: ok; a definite refusal (the server said what
// it did not do); or unknown (no answer, a timeout, a lost leader).
func classify(err error) (answer, code, msg string) {
	if err == nil {
		return AnsOK, "", ""
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return AnsUnknown, codes.DeadlineExceeded.String(), err.Error()
	}
	st, _ := status.FromError(err)
	switch st.Code() {
	case codes.InvalidArgument, codes.NotFound, codes.AlreadyExists, codes.FailedPrecondition,
		codes.PermissionDenied, codes.Unauthenticated, codes.OutOfRange, codes.ResourceExhausted:
		return AnsRefused, st.Code().String(), st.Message()
	}
	return AnsUnknown, st.Code().String(), st.Message()
}

// WriteHistory writes the history as JSON lines.
func WriteHistory(path string, ops []Op) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for i := range ops {
		if err := enc.Encode(&ops[i]); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
