package console

import (
	"fmt"
	"net/http"
	"testing"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// BenchmarkSessionsPage10k renders the sessions page (the newest 50) with
// 10,000 sessions in the state: the console reads one page through
// ListSessions over loopback gRPC, following its tokens.
func BenchmarkSessionsPage10k(b *testing.B) {
	api := newFakeAPI()
	statuses := []dexv1.SessionStatus{dexv1.SessionStatus_SESSION_STATUS_IDLE, dexv1.SessionStatus_SESSION_STATUS_RUNNING, dexv1.SessionStatus_SESSION_STATUS_WAITING}
	for i := range 10_000 {
		api.add(&dexv1.Session{Id: fmt.Sprintf("ses-%016x", i*7919), Status: statuses[i%3], CreatedAtMs: int64(1_700_000_000_000 + i), UpdatedAtMs: int64(1_700_000_000_000 + i), TurnsCompleted: uint64(i % 5)})
	}
	br := newBrowser(b, serveFake(b, api, Config{}))
	for _, path := range []string{"/ui/sessions", "/ui/sessions?status=waiting", "/ui/sessions?order=updated&dir=oldest"} {
		b.Run(path, func(b *testing.B) {
			for b.Loop() {
				if rec := br.get(path); rec.Code != http.StatusOK {
					b.Fatalf("status %d", rec.Code)
				}
			}
		})
	}
}
