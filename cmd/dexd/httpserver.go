package main

import (
	"net/http"
	"time"
)

// HTTP limits of the /healthz, /readyz and /metrics port.
const (
	// maxHeaderBytes is the largest request header answered; a larger one
	// gets 431.
	maxHeaderBytes = 64 << 10
	// readHeaderLimit is what the server reads of a header before it gives
	// up on the connection. It is well above maxHeaderBytes so that a client
	// sending a header of a few MB has finished writing when the 431 comes
	// (net/http closes at its own limit while the client is still writing,
	// and the client sees a reset instead of an answer).
	readHeaderLimit = 4 << 20
)

// newHTTPServer serves h with timeouts (a slow or stalled client cannot hold
// a connection) and header limits, and answers 405 to a method other than
// GET or HEAD on the read-only endpoints.
func newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           limitRequests(h),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    readHeaderLimit,
	}
}

// readOnlyPaths answer GET and HEAD only.
var readOnlyPaths = map[string]bool{"/healthz": true, "/readyz": true, "/readyz/leader": true, "/metrics": true}

func limitRequests(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if headerSize(r) > maxHeaderBytes {
			w.Header().Set("Connection", "close")
			http.Error(w, "request header fields too large", http.StatusRequestHeaderFieldsTooLarge)
			return
		}
		if readOnlyPaths[r.URL.Path] && r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed: use GET", http.StatusMethodNotAllowed)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// headerSize is about the bytes of the request line and header.
func headerSize(r *http.Request) int {
	n := len(r.Method) + len(r.RequestURI) + len(r.Proto) + 4
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}
