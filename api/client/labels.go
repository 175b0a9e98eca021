package client

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"google.golang.org/grpc"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// Labels turns a map of labels into the labels of a request, sorted by key:
// for CreateSessionRequest.Labels, ForkSessionRequest.Labels or a list's
// filter (ListSessionsRequest.Labels, every one must match). Sorted, the
// same map always makes the same request.
func Labels(m map[string]string) []*dexv1.Label {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]*dexv1.Label, 0, len(keys))
	for _, k := range keys {
		out = append(out, &dexv1.Label{Key: k, Value: m[k]})
	}
	return out
}

// SetLabels changes a session's labels (docs/labels.md): the keys of remove
// go, then the labels of set are put (a key already there takes the new
// value), in one change; it returns the session as it is after it. set is
// sent in key order, so the same arguments make the same request. The
// change is idempotent (its end state does not depend on repeats), so the
// call is retried across Unavailable like a read.
//
// An empty session id, an empty key, a key removed twice or a key both set
// and removed is refused before any call; the cluster checks the keys'
// and values' rules and the bound of 32 labels (InvalidArgument, and
// nothing changed), and answers NotFound for an unknown session.
func (c *Client) SetLabels(ctx context.Context, sessionID string, set map[string]string, remove []string) (*dexv1.Session, error) {
	if sessionID == "" {
		return nil, errors.New("session id: empty (name the session whose labels change)")
	}
	for k := range set {
		if k == "" {
			return nil, errors.New("set: an empty label key")
		}
	}
	removed := make(map[string]bool, len(remove))
	for i, k := range remove {
		switch {
		case k == "":
			return nil, fmt.Errorf("remove[%d]: an empty label key", i)
		case removed[k]:
			return nil, fmt.Errorf("remove: key %q is given twice", k)
		}
		if _, ok := set[k]; ok {
			return nil, fmt.Errorf("key %q is both in set and in remove", k)
		}
		removed[k] = true
	}
	req := &dexv1.SetLabelsRequest{SessionId: sessionID, Set: Labels(set), Remove: slices.Clone(remove)}
	resp, err := call(ctx, true, func(ctx context.Context, o ...grpc.CallOption) (*dexv1.SetLabelsResponse, error) {
		return c.svc.SetLabels(ctx, req, o...)
	})
	if err != nil {
		return nil, err
	}
	return resp.Session, nil
}
