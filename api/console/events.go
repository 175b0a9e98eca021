package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// keepAlive is how often an idle event stream sends a comment, so proxies
// and the browser keep it open.
const keepAlive = 15 * time.Second

// sessionEvents streams a session's events as server-sent events, fed by
// WatchSession. The watch follows the leader across a takeover by itself;
// if this stream breaks, the browser's EventSource reconnects with the
// Last-Event-ID it saw and misses nothing.
func (c *Console) sessionEvents(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	after := uint64(0)
	for _, v := range []string{r.Header.Get("Last-Event-ID"), r.URL.Query().Get("after")} {
		if v == "" {
			continue
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			c.renderError(w, r, http.StatusBadRequest, "after "+strconv.Quote(v)+" is not an event seq")
			return
		}
		after = n
		break
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		c.renderError(w, r, http.StatusInternalServerError, "this server cannot stream")
		return
	}
	// The HTTP server's write timeout is for pages, not for a stream.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	var mu sync.Mutex
	send := func(s string) error {
		mu.Lock()
		defer mu.Unlock()
		if _, err := fmt.Fprint(w, s); err != nil {
			return err
		}
		flusher.Flush()
		return nil
	}
	_ = send("retry: 1000\n\n")

	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		t := time.NewTicker(keepAlive)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if send(": keep-alive\n\n") != nil {
					cancel()
				}
			}
		}
	}()
	if tok := token(r); tok != "" {
		ctx = withToken(ctx, tok)
	}
	err := c.sessions.WatchSession(ctx, id, after, func(ev *dexv1.Event) error {
		if o := ev.Output; o != nil {
			// Live output (docs/design/streaming.md) carries no id: the
			// page keeps each attempt's length itself, so a reconnection,
			// which starts each attempt's output over, repeats nothing.
			b, _ := json.Marshal(map[string]any{"type": ev.Type, "step": ev.StepId, "attempt": o.Attempt, "offset": o.Offset, "text": o.Text})
			return send(fmt.Sprintf("event: output\ndata: %s\n\n", b))
		}
		b, _ := json.Marshal(map[string]any{"seq": ev.Seq, "type": ev.Type, "step": ev.StepId, "detail": ev.Detail, "at_ms": ev.AtMs})
		return send(fmt.Sprintf("id: %d\nevent: dex\ndata: %s\n\n", ev.Seq, b))
	}, client.OnEventsNotKept(func(client.EventsNotKeptError) error { return nil }), client.WithLiveOutput())
	if err != nil && ctx.Err() == nil {
		// A definite refusal (an unknown session, a token that may not
		// read): tell the page, which stops reconnecting.
		b, _ := json.Marshal(map[string]any{"code": status.Code(err).String(), "message": c.apiMessage(r, err), "gone": status.Code(err) == codes.NotFound})
		_ = send(fmt.Sprintf("event: fail\ndata: %s\n\n", b))
	}
}
