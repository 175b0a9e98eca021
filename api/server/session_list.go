package server

import (
	"cmp"
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/fsm/store"
)

// listQuery is a ListSessionsRequest checked: its filter, its order and
// where its page starts.
type listQuery struct {
	byID   bool // no filter, no order asked: id order, as before filters
	filter store.SessionFilter
	order  store.ListOrder
	desc   bool
	after  *store.ListPosition
	size   int
}

func (q *listQuery) hasFilter() bool {
	f := q.filter
	return f.Status != 0 || f.Agent != "" || f.ParentID != "" || f.ForkedFrom != "" || len(f.Labels) > 0 ||
		f.CreatedFrom != 0 || f.CreatedTo != 0 || f.UpdatedFrom != 0 || f.UpdatedTo != 0
}

// parseListQuery checks a request: bad input is InvalidArgument.
func parseListQuery(req *dexv1.ListSessionsRequest) (*listQuery, error) {
	q := &listQuery{size: pageSize(req.PageSize, defaultSessionPage), desc: req.Descending}
	bad := func(format string, args ...any) error {
		return status.Errorf(codes.InvalidArgument, format, args...)
	}
	if _, ok := dexv1.SessionStatus_name[int32(req.Status)]; !ok || req.Status == dexv1.SessionStatus_SESSION_STATUS_DELETED {
		return nil, bad("status %d is not a status a session is listed in", req.Status)
	}
	f := &q.filter
	f.Status = fsmpb.SessionStatus(req.Status)
	f.Agent, f.ParentID, f.ForkedFrom = req.Agent, req.ParentId, req.ForkedFrom
	for _, l := range req.Labels {
		f.Labels = append(f.Labels, &fsmpb.Label{Key: l.GetKey(), Value: l.GetValue()})
	}
	if r := fsm.CheckLabels(f.Labels); r != nil {
		return nil, bad("labels: %s", r.Reason)
	}
	for _, r := range []struct {
		name     string
		from, to int64
	}{{"created", req.CreatedAfterMs, req.CreatedBeforeMs}, {"updated", req.UpdatedAfterMs, req.UpdatedBeforeMs}} {
		if r.from < 0 || r.to < 0 {
			return nil, bad("%s time range: a time is not negative", r.name)
		}
		if r.from != 0 && r.to != 0 && r.from > r.to {
			return nil, bad("%s time range: after (%d) is later than before (%d)", r.name, r.from, r.to)
		}
	}
	f.CreatedFrom, f.CreatedTo = req.CreatedAfterMs, req.CreatedBeforeMs
	f.UpdatedFrom, f.UpdatedTo = req.UpdatedAfterMs, req.UpdatedBeforeMs
	switch req.OrderBy {
	case dexv1.SessionOrder_SESSION_ORDER_UNSPECIFIED:
		q.byID = !q.hasFilter() && !req.Descending
	case dexv1.SessionOrder_SESSION_ORDER_CREATED:
	case dexv1.SessionOrder_SESSION_ORDER_UPDATED:
		q.order = store.ListByUpdated
	default:
		return nil, bad("order_by %d is not an order", req.OrderBy)
	}
	if q.byID || req.PageToken == "" {
		return q, nil
	}
	after, err := parseListToken(req.PageToken, q.order, q.desc)
	if err != nil {
		return nil, bad("page_token: %v", err)
	}
	q.after = after
	return q, nil
}

// A page token of an ordered list is base64url of
// "v1,ORDER,DIRECTION,TIME,ID": the last session (or index entry) the page
// examined, which the next page starts after. It names its order so a
// token of one order is not read in another.
func listToken(p *store.ListPosition, order store.ListOrder, desc bool) string {
	if p == nil {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf("v1,%s,%s,%d,%s", orderName(order), dirName(desc), p.At, p.ID)))
}

func orderName(o store.ListOrder) string {
	if o == store.ListByUpdated {
		return "updated"
	}
	return "created"
}

func dirName(desc bool) string {
	if desc {
		return "desc"
	}
	return "asc"
}

func parseListToken(tok string, order store.ListOrder, desc bool) (*store.ListPosition, error) {
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return nil, fmt.Errorf("not a token of this list")
	}
	parts := strings.SplitN(string(raw), ",", 5)
	if len(parts) != 5 || parts[0] != "v1" || parts[4] == "" {
		return nil, fmt.Errorf("not a token of this list")
	}
	if parts[1] != orderName(order) || parts[2] != dirName(desc) {
		return nil, fmt.Errorf("the token reads by %s %s, the request by %s %s", parts[1], parts[2], orderName(order), dirName(desc))
	}
	at, err := strconv.ParseInt(parts[3], 10, 64)
	if err != nil {
		return nil, fmt.Errorf("not a token of this list")
	}
	return &store.ListPosition{At: at, ID: parts[4]}, nil
}

func (s *Sessions) ListSessions(ctx context.Context, req *dexv1.ListSessionsRequest) (*dexv1.ListSessionsResponse, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	q, err := parseListQuery(req)
	if err != nil {
		return nil, err
	}
	st := s.node.State()
	out := &dexv1.ListSessionsResponse{}
	var page []*fsmpb.Session
	if q.byID {
		page, out.NextPageToken = st.SessionsPage(req.PageToken, q.size)
	} else {
		var next *store.ListPosition
		page, next = st.ListSessions(q.filter, q.order, q.desc, q.after, q.size)
		out.NextPageToken = listToken(next, q.order, q.desc)
	}
	return summaryPage(out, page, q, func(id string) string { return firstMessage(st, id) }), nil
}

// summaryPage adds page's summaries, with each session's first message
// as first reads it, to out. It also stops at pageBytes (labels and the
// first message make a summary up to about 10 KiB) after at least one
// session, with a token after the last it holds.
func summaryPage(out *dexv1.ListSessionsResponse, page []*fsmpb.Session, q *listQuery, first func(id string) string) *dexv1.ListSessionsResponse {
	size := 0
	for _, sess := range page {
		sum := sessionSummary(sess)
		sum.FirstMessage = first(sess.Id)
		if size += proto.Size(sum); size > pageBytes && len(out.Sessions) > 0 {
			last := out.Sessions[len(out.Sessions)-1]
			if q.byID {
				out.NextPageToken = last.Id
			} else {
				out.NextPageToken = listToken(&store.ListPosition{At: summaryAt(last, q.order), ID: last.Id}, q.order, q.desc)
			}
			break
		}
		out.Sessions = append(out.Sessions, sum)
	}
	return out
}

func sessionSummary(sess *fsmpb.Session) *dexv1.SessionSummary {
	sum := &dexv1.SessionSummary{
		Id: sess.Id, ParentId: sess.ParentId, Status: dexv1.SessionStatus(sess.Status), TurnsCompleted: sess.TurnsCompleted, UpdatedAtMs: sess.UpdatedAtMs,
		CreatedAtMs: sess.CreatedAtMs, Agent: sess.Agent, ForkedFrom: sess.ForkedFrom, ForkedAtSeq: sess.ForkedAtSeq,
		PauseReason: dexv1.PauseReason(sess.PauseReason), ResumeAtMs: sess.ResumeAtMs,
	}
	for _, l := range sess.Labels {
		sum.Labels = append(sum.Labels, &dexv1.Label{Key: l.Key, Value: l.Value})
	}
	return sum
}

// firstMessageBytes is how much of a session's first message a summary
// carries: enough to tell sessions apart in a list.
const firstMessageBytes = 200

// firstMessage is the text of the session's first user message, cut to
// firstMessageBytes: its first kept history entry when that is a user
// message, else the first message of its inbox (a turn not started yet).
// Each read seeks the session's rows by index and stops after a row or
// two, however long the session's history.
func firstMessage(st *fsm.State, id string) string {
	if h, _ := st.History(id, 0, 1, 0); len(h) > 0 {
		if h[0].Kind == fsmpb.HistoryKind_HISTORY_KIND_USER {
			return cutUTF8(h[0].Text, firstMessageBytes)
		}
	}
	if in := st.Inbox(id, 0); len(in) > 0 {
		return cutUTF8(in[0].Text, firstMessageBytes)
	}
	return ""
}

// cutUTF8 keeps at most n bytes of text, cut before a character that
// would not fit whole: a proto string stays valid UTF-8.
func cutUTF8(text string, n int) string {
	if len(text) <= n {
		return text
	}
	for n > 0 && !utf8.RuneStart(text[n]) {
		n--
	}
	return text[:n]
}

// summaryAt is a summary's time in order.
func summaryAt(s *dexv1.SessionSummary, order store.ListOrder) int64 {
	if order == store.ListByUpdated {
		return s.UpdatedAtMs
	}
	return s.CreatedAtMs
}

// comparePositions orders two positions in the reading direction.
func comparePositions(a, b store.ListPosition, desc bool) int {
	c := cmp.Or(cmp.Compare(a.At, b.At), strings.Compare(a.ID, b.ID))
	if desc {
		return -c
	}
	return c
}

// SetLabels removes and sets labels of a session.
func (s *Sessions) SetLabels(ctx context.Context, req *dexv1.SetLabelsRequest) (*dexv1.SetLabelsResponse, error) {
	if err := required("session_id", req.SessionId); err != nil {
		return nil, err
	}
	c := &fsmpb.SetLabels{SessionId: req.SessionId, Set: labelsFromAPI(req.Set), Remove: req.Remove}
	if r := fsm.CheckLabels(c.Set); r != nil {
		return nil, status.Error(codes.InvalidArgument, r.Reason)
	}
	if _, err := s.propose(ctx, &fsmpb.Command{Body: &fsmpb.Command_SetLabels{SetLabels: c}}); err != nil {
		return nil, err
	}
	return &dexv1.SetLabelsResponse{Session: s.node.State().Session(req.SessionId).API()}, nil
}

func labelsFromAPI(in []*dexv1.Label) []*fsmpb.Label {
	var out []*fsmpb.Label
	for _, l := range in {
		out = append(out, &fsmpb.Label{Key: l.GetKey(), Value: l.GetValue()})
	}
	return out
}
