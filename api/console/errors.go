package console

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// httpCode is the page status of an API error.
func httpCode(err error) int {
	switch status.Code(err) {
	case codes.NotFound:
		return http.StatusNotFound
	case codes.InvalidArgument, codes.OutOfRange, codes.ResourceExhausted:
		return http.StatusBadRequest
	case codes.FailedPrecondition, codes.AlreadyExists, codes.Aborted:
		return http.StatusConflict
	case codes.PermissionDenied:
		return http.StatusForbidden
	case codes.Unauthenticated:
		return http.StatusUnauthorized
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// apiMessage is the API's own message, with where the leader is when no
// node serving clients answered, or, when too few voters answer to elect
// one, just that.
func (c *Console) apiMessage(r *http.Request, err error) string {
	msg, _ := c.apiProblem(r, err)
	return msg
}

// apiProblem is apiMessage, and the banner the page shows on top when the
// cluster has no quorum ("" otherwise).
func (c *Console) apiProblem(r *http.Request, err error) (msg, banner string) {
	msg = status.Convert(err).Message()
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		if nq := c.noQuorum(r); nq != nil {
			return nq.Error(), nq.Error()
		}
		if w := c.where(); w != nil {
			if w.LeaderID == "" {
				return fmt.Sprintf("no node serving clients answered (%s); node %s knows no leader now", msg, w.Node), ""
			}
			return fmt.Sprintf("no node serving clients answered (%s); node %s sees leader %s at %s", msg, w.Node, w.LeaderID, w.LeaderAddr), ""
		}
		return "no node serving clients answered: " + msg, ""
	case codes.Unauthenticated:
		return msg + " — log in with a token at /ui/login", ""
	}
	return msg, ""
}

func (c *Console) apiError(w http.ResponseWriter, r *http.Request, err error) {
	msg, banner := c.apiProblem(r, err)
	code := httpCode(err)
	c.render(w, r, code, "error", page{Title: http.StatusText(code), Error: msg, Banner: banner, Data: code})
}

// noQuorumTimeout bounds the Status call that explains an unavailable
// cluster (its own page's time may be spent already).
const noQuorumTimeout = 2 * time.Second

// noQuorum asks this node's Status whether too few voters answer to elect
// a leader: a *client.NoQuorumError if so, else nil.
func (c *Console) noQuorum(r *http.Request) error {
	ctx := r.Context()
	if t := token(r); t != "" {
		ctx = withToken(ctx, t)
	}
	ctx, cancel := context.WithTimeout(ctx, noQuorumTimeout)
	defer cancel()
	st, err := c.admin.Status(ctx, &dexv1.StatusRequest{})
	if err != nil {
		return nil
	}
	return client.CheckQuorum(st)
}
