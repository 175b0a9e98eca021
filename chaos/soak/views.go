package soak

import (
	"context"
	"crypto/sha256"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// What the checks after the soak compare between the state a cluster
// serves and the state it should hold: every session, the message ids it
// accepted (history and inbox) and each history entry by seq, its texts by
// hash. A cluster that no Worker or client talks to may still add entries
// (a fired timer, the outcome of an attempt whose lease ran out), so
// entries past the expected ones are allowed; none may be missing or
// differ.

// entryView is what is compared of one history entry.
type entryView struct {
	messageID, callID, tool string
	sum                     [sha256.Size]byte // text, arguments and tool calls
}

// sessionView is what is compared of one session.
type sessionView struct {
	keys    []string // sorted
	history map[uint64]entryView
	// mayGo: a closed session with a retention, which the cluster may
	// delete before it is read back (the time was set when it closed).
	mayGo bool
}

func entrySum(text, args string, calls [][3]string) [sha256.Size]byte {
	h := sha256.New()
	for _, s := range append([]string{text, args}, flatten(calls)...) {
		fmt.Fprintf(h, "%d:%s", len(s), s)
	}
	var out [sha256.Size]byte
	copy(out[:], h.Sum(nil))
	return out
}

func flatten(calls [][3]string) []string {
	var out []string
	for _, c := range calls {
		out = append(out, c[:]...)
	}
	return out
}

func viewOfResponse(r *dexv1.GetSessionResponse) sessionView {
	v := sessionView{keys: sortedKeys(sessionKeys(r)), history: map[uint64]entryView{}, mayGo: r.GetSession().GetDeleteAtMs() != 0}
	for _, e := range r.GetSession().GetHistory() {
		var calls [][3]string
		for _, c := range e.ToolCalls {
			calls = append(calls, [3]string{c.CallId, c.Tool, c.Arguments})
		}
		v.history[e.Seq] = entryView{messageID: e.MessageId, callID: e.CallId, tool: e.Tool, sum: entrySum(e.Text, e.Arguments, calls)}
	}
	return v
}

// viewsOfResponses: the views of sessions as a cluster answered them.
func viewsOfResponses(rs map[string]*dexv1.GetSessionResponse) map[string]sessionView {
	out := map[string]sessionView{}
	for id, r := range rs {
		out[id] = viewOfResponse(r)
	}
	return out
}

// viewsOfState: the views of every session a state machine holds.
func viewsOfState(st *fsm.State) map[string]sessionView {
	out := map[string]sessionView{}
	for _, sess := range st.Sessions() {
		entries, _ := st.History(sess.Id, 0, math.MaxInt, math.MaxInt)
		v := sessionView{history: map[uint64]entryView{}, mayGo: sess.DeleteAtMs != 0}
		for _, e := range entries {
			if e.MessageId != "" {
				v.keys = append(v.keys, e.MessageId)
			}
			v.history[e.Seq] = entryView{messageID: e.MessageId, callID: e.CallId, tool: e.Tool, sum: entrySum(e.Text, e.Arguments, storedCalls(e.ToolCalls))}
		}
		for _, m := range st.Inbox(sess.Id, math.MaxInt) {
			v.keys = append(v.keys, m.Id)
		}
		sort.Strings(v.keys)
		v.keys = slices.Compact(v.keys)
		out[sess.Id] = v
	}
	return out
}

func storedCalls(cs []*fsmpb.ToolCall) [][3]string {
	var out [][3]string
	for _, c := range cs {
		out = append(out, [3]string{c.CallId, c.Tool, c.Arguments})
	}
	return out
}

// diff says how got differs from want ("" when it holds everything want
// does).
func (want sessionView) diff(got sessionView) string {
	if !slices.Equal(want.keys, got.keys) {
		return fmt.Sprintf("message ids %v, want %v", got.keys, want.keys)
	}
	seqs := make([]uint64, 0, len(want.history))
	for seq := range want.history {
		seqs = append(seqs, seq)
	}
	slices.Sort(seqs)
	for _, seq := range seqs {
		g, ok := got.history[seq]
		switch {
		case !ok:
			return fmt.Sprintf("history entry %d is missing", seq)
		case g != want.history[seq]:
			return fmt.Sprintf("history entry %d differs", seq)
		}
	}
	return ""
}

// compareServed lists and reads every session cl serves and compares them
// with want; those that may go (closed sessions a retention may delete
// meanwhile) may be missing. It returns how many sessions it read and what
// differs.
func compareServed(ctx context.Context, cl *client.Client, want map[string]sessionView) (int, error) {
	list, err := cl.ListSessions(ctx)
	if err != nil {
		return 0, fmt.Errorf("list sessions: %w", err)
	}
	served := map[string]bool{}
	for _, s := range list {
		served[s.Id] = true
	}
	var diffs []string
	for id := range served {
		if _, ok := want[id]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s is served and should not exist", id))
		}
	}
	read := 0
	for _, id := range sortedKeys(keysOf(want)) {
		if !served[id] {
			if !want[id].mayGo {
				diffs = append(diffs, fmt.Sprintf("%s is not listed", id))
			}
			continue
		}
		r, err := cl.GetSession(ctx, id)
		if want[id].mayGo && status.Code(err) == codes.NotFound {
			continue
		}
		if err != nil {
			return read, fmt.Errorf("read %s: %w", id, err)
		}
		read++
		if d := want[id].diff(viewOfResponse(r)); d != "" {
			diffs = append(diffs, id+": "+d)
		}
	}
	if n := len(diffs); n > 0 {
		sort.Strings(diffs)
		return read, fmt.Errorf("%d differences over %d sessions: %s", n, len(want), strings.Join(diffs[:min(n, 5)], "; "))
	}
	return read, nil
}

func keysOf[V any](m map[string]V) map[string]bool {
	out := map[string]bool{}
	for k := range m {
		out[k] = true
	}
	return out
}
