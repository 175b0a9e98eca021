package client

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxRetryAfter bounds what RetryAfterOf returns, so that any header value
// fits a time.Duration; the cluster bounds a provider's hold further.
const maxRetryAfter = 24 * time.Hour

// RetryAfterOf is how long the provider asked to wait before its next call,
// as a model handler's error says it (0: it does not say). It looks through
// wrapped errors (fmt.Errorf %w, errors.Join) for, in order:
//
//   - a *ModelError with a RetryAfter;
//   - the response headers an error exposes: an exported Response
//     *http.Response field (as openai-go's and anthropic-sdk-go's errors
//     have), or a Header() http.Header or ResponseHeader() http.Header
//     method. retry-after-ms (milliseconds, as OpenAI sends it) comes
//     first, then retry-after: seconds (a fraction allowed) or an HTTP
//     date. A value that is not one of these, or not in the future, is
//     ignored.
//
// The Worker reports it with a rate_limit failure only: the cluster then
// holds the session's provider until then (docs/model-errors.md).
func RetryAfterOf(err error) time.Duration {
	return retryAfterOf(err, time.Now())
}

// RetryAfterOfHeader reads a provider's Retry-After from the header of its
// HTTP answer, as RetryAfterOf does (0: none), for a handler that makes the
// call itself.
func RetryAfterOfHeader(h http.Header) time.Duration {
	return headerRetryAfter(h, time.Now())
}

func retryAfterOf(err error, now time.Time) time.Duration {
	if d := findInTree(err, modelErrorRetryAfter); d > 0 {
		return d
	}
	return findInTree(err, func(e error) time.Duration { return headerRetryAfter(exposedHeader(e), now) })
}

func modelErrorRetryAfter(err error) time.Duration {
	if me, ok := err.(*ModelError); ok && me.RetryAfter > 0 {
		return min(me.RetryAfter, maxRetryAfter)
	}
	return 0
}

// exposedHeader is the HTTP response header err itself (not what it wraps)
// exposes (nil: none).
func exposedHeader(err error) http.Header {
	switch e := err.(type) {
	case interface{ Header() http.Header }:
		return e.Header()
	case interface{ ResponseHeader() http.Header }:
		return e.ResponseHeader()
	}
	f := fieldOf(err, "Response")
	if !f.IsValid() || !f.CanInterface() {
		return nil
	}
	if resp, ok := f.Interface().(*http.Response); ok && resp != nil {
		return resp.Header
	}
	return nil
}

// headerRetryAfter reads a Retry-After from response headers (0: none
// that can be read).
func headerRetryAfter(h http.Header, now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	if ms, err := strconv.ParseFloat(strings.TrimSpace(h.Get("Retry-After-Ms")), 64); err == nil {
		if d := durationOf(ms * float64(time.Millisecond)); d > 0 {
			return d
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		return durationOf(secs * float64(time.Second))
	}
	if at, err := http.ParseTime(v); err == nil {
		return durationOf(float64(at.Sub(now)))
	}
	return 0
}

// durationOf is ns nanoseconds, at most maxRetryAfter; 0 for a value that
// is not a positive number.
func durationOf(ns float64) time.Duration {
	if !(ns > 0) || math.IsInf(ns, 1) {
		return 0
	}
	return time.Duration(min(ns, float64(maxRetryAfter)))
}
