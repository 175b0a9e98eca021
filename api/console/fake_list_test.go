package console

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// The fake's ListSessions plays the API's: it narrows by every filter of
// the request, orders by created or updated time (then id), newest first
// when asked, and reads pages with tokens that resume the order they were
// made in. Like the cluster it examines a bounded number of sessions a
// page (scan, default fakeScan): a filtered page may come back short or
// empty with a token. Every request is kept in lists, so a test sees what
// the console asked for.

// fakeScan is how many sessions one page examines unless a test sets scan.
const fakeScan = 25

// fakeFilter is a list's or a bulk job's filter.
type fakeFilter struct {
	status                                         dexv1.SessionStatus
	agent, parent, forkedFrom                      string
	labels                                         []*dexv1.Label
	createdFrom, createdTo, updatedFrom, updatedTo int64
}

func filterOfList(r *dexv1.ListSessionsRequest) fakeFilter {
	return fakeFilter{status: r.Status, agent: r.Agent, parent: r.ParentId, forkedFrom: r.ForkedFrom, labels: r.Labels,
		createdFrom: r.CreatedAfterMs, createdTo: r.CreatedBeforeMs, updatedFrom: r.UpdatedAfterMs, updatedTo: r.UpdatedBeforeMs}
}

func filterOfBulk(bf *dexv1.BulkFilter) fakeFilter {
	return fakeFilter{status: bf.GetStatus(), agent: bf.GetAgent(), parent: bf.GetParentId(), forkedFrom: bf.GetForkedFrom(), labels: bf.GetLabels(),
		createdFrom: bf.GetCreatedFromMs(), createdTo: bf.GetCreatedToMs(), updatedFrom: bf.GetUpdatedFromMs(), updatedTo: bf.GetUpdatedToMs()}
}

func (ff fakeFilter) empty() bool {
	return ff.status == 0 && ff.agent == "" && ff.parent == "" && ff.forkedFrom == "" && len(ff.labels) == 0 &&
		ff.createdFrom == 0 && ff.createdTo == 0 && ff.updatedFrom == 0 && ff.updatedTo == 0
}

// check refuses what the API refuses.
func (ff fakeFilter) check() error {
	if _, ok := dexv1.SessionStatus_name[int32(ff.status)]; !ok || ff.status == dexv1.SessionStatus_SESSION_STATUS_DELETED {
		return status.Errorf(codes.InvalidArgument, "status %d is not a status a session is listed in", ff.status)
	}
	for _, r := range [][2]int64{{ff.createdFrom, ff.createdTo}, {ff.updatedFrom, ff.updatedTo}} {
		if r[0] < 0 || r[1] < 0 || r[0] != 0 && r[1] != 0 && r[0] > r[1] {
			return status.Errorf(codes.InvalidArgument, "time range %d..%d", r[0], r[1])
		}
	}
	return checkFakeLabels(ff.labels)
}

func (ff fakeFilter) matches(s *dexv1.Session) bool {
	in := func(at, from, to int64) bool { return (from == 0 || at >= from) && (to == 0 || at < to) }
	if ff.status != 0 && s.Status != ff.status || ff.agent != "" && s.Agent != ff.agent ||
		ff.parent != "" && s.ParentId != ff.parent || ff.forkedFrom != "" && s.ForkedFrom != ff.forkedFrom ||
		!in(s.CreatedAtMs, ff.createdFrom, ff.createdTo) || !in(s.UpdatedAtMs, ff.updatedFrom, ff.updatedTo) {
		return false
	}
	for _, want := range ff.labels {
		if !slices.ContainsFunc(s.Labels, func(l *dexv1.Label) bool { return l.Key == want.Key && l.Value == want.Value }) {
			return false
		}
	}
	return true
}

// fakeSummary is a session's summary as the API makes it.
func fakeSummary(s *dexv1.Session) *dexv1.SessionSummary {
	first := ""
	if h := s.History; len(h) > 0 && h[0].Kind == dexv1.HistoryKind_HISTORY_KIND_USER {
		first = h[0].Text
	} else if len(s.Inbox) > 0 {
		first = s.Inbox[0].Text
	}
	if len(first) > 200 {
		n := 200
		for !utf8.RuneStart(first[n]) {
			n--
		}
		first = first[:n]
	}
	return &dexv1.SessionSummary{Id: s.Id, ParentId: s.ParentId, Status: s.Status, Agent: s.Agent, TurnsCompleted: s.TurnsCompleted,
		CreatedAtMs: s.CreatedAtMs, UpdatedAtMs: s.UpdatedAtMs, Labels: s.Labels, ForkedFrom: s.ForkedFrom, ForkedAtSeq: s.ForkedAtSeq,
		FirstMessage: first, PauseReason: s.PauseReason, ResumeAtMs: s.ResumeAtMs}
}

// listRequests is what the console asked ListSessions, in order.
func (f *fakeAPI) listRequests() []*dexv1.ListSessionsRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*dexv1.ListSessionsRequest{}, f.lists...)
}

// gotSessions is the sessions GetSession was asked for, in order.
func (f *fakeAPI) gotSessions() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string{}, f.gets...)
}

func (f *fakeAPI) ListSessions(ctx context.Context, req *dexv1.ListSessionsRequest) (*dexv1.ListSessionsResponse, error) {
	if err := f.authorize(ctx, false); err != nil {
		return nil, err
	}
	if f.down != "" {
		return nil, status.Error(codes.Unavailable, f.down)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists = append(f.lists, proto.Clone(req).(*dexv1.ListSessionsRequest))
	ff := filterOfList(req)
	if err := ff.check(); err != nil {
		return nil, err
	}
	size := int(req.PageSize)
	if size == 0 {
		size = 1000
	}
	all := make([]*dexv1.Session, 0, len(f.sessions))
	for _, got := range f.sessions {
		all = append(all, got.Session)
	}
	out := &dexv1.ListSessionsResponse{}
	if req.OrderBy == dexv1.SessionOrder_SESSION_ORDER_UNSPECIFIED && ff.empty() && !req.Descending {
		// By id, as before filters existed: the token is the last id.
		slices.SortFunc(all, func(a, b *dexv1.Session) int { return strings.Compare(a.Id, b.Id) })
		for _, s := range all {
			if s.Id <= req.PageToken {
				continue
			}
			if len(out.Sessions) == size {
				out.NextPageToken = out.Sessions[size-1].Id
				break
			}
			out.Sessions = append(out.Sessions, fakeSummary(s))
		}
		return out, nil
	}
	order, at := "created", func(s *dexv1.Session) int64 { return s.CreatedAtMs }
	switch req.OrderBy {
	case dexv1.SessionOrder_SESSION_ORDER_UNSPECIFIED, dexv1.SessionOrder_SESSION_ORDER_CREATED:
	case dexv1.SessionOrder_SESSION_ORDER_UPDATED:
		order, at = "updated", func(s *dexv1.Session) int64 { return s.UpdatedAtMs }
	default:
		return nil, status.Errorf(codes.InvalidArgument, "order_by %d is not an order", req.OrderBy)
	}
	dir := map[bool]string{false: "asc", true: "desc"}[req.Descending]
	compare := func(aAt int64, aID string, bAt int64, bID string) int {
		c := cmp.Or(cmp.Compare(aAt, bAt), strings.Compare(aID, bID))
		if req.Descending {
			return -c
		}
		return c
	}
	slices.SortFunc(all, func(a, b *dexv1.Session) int { return compare(at(a), a.Id, at(b), b.Id) })
	start := 0
	if req.PageToken != "" {
		parts := strings.SplitN(req.PageToken, ",", 5)
		if len(parts) != 5 || parts[0] != "fake" {
			return nil, status.Error(codes.InvalidArgument, "page_token: not a token of this list")
		}
		if parts[1] != order || parts[2] != dir {
			return nil, status.Errorf(codes.InvalidArgument, "page_token: the token reads by %s %s, the request by %s %s", parts[1], parts[2], order, dir)
		}
		afterAt, err := strconv.ParseInt(parts[3], 10, 64)
		if err != nil {
			return nil, status.Error(codes.InvalidArgument, "page_token: not a token of this list")
		}
		for start < len(all) && compare(at(all[start]), all[start].Id, afterAt, parts[4]) <= 0 {
			start++
		}
	}
	scan := f.scan
	if scan == 0 {
		scan = fakeScan
	}
	token := func(s *dexv1.Session) string { return fmt.Sprintf("fake,%s,%s,%d,%s", order, dir, at(s), s.Id) }
	for i, examined := start, 0; i < len(all); i++ {
		if len(out.Sessions) == size || examined == scan {
			out.NextPageToken = token(all[i-1])
			break
		}
		examined++
		if ff.matches(all[i]) {
			out.Sessions = append(out.Sessions, fakeSummary(all[i]))
		}
	}
	return out, nil
}
