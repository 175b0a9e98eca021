package console

import (
	"fmt"
	"net/http"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
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
// node serving clients answered.
func (c *Console) apiMessage(err error) string {
	msg := status.Convert(err).Message()
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		if w := c.where(); w != nil {
			if w.LeaderID == "" {
				return fmt.Sprintf("no node serving clients answered (%s); node %s knows no leader now", msg, w.Node)
			}
			return fmt.Sprintf("no node serving clients answered (%s); node %s sees leader %s at %s", msg, w.Node, w.LeaderID, w.LeaderAddr)
		}
		return "no node serving clients answered: " + msg
	case codes.Unauthenticated:
		return msg + " — log in with a token at /ui/login"
	}
	return msg
}

func (c *Console) apiError(w http.ResponseWriter, r *http.Request, err error) {
	c.renderError(w, r, httpCode(err), c.apiMessage(err))
}
