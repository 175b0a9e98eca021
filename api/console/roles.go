package console

import (
	"context"
	"crypto/sha256"
	"net/http"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// The console shows an action only to a caller whose token may act. The
// API has no call that names a token's role, so the console asks a write
// that cannot change anything: a CancelSession without a session id. The
// API checks the token before the request, so a token that may not write
// is refused (PermissionDenied, Unauthenticated) and any other token gets
// InvalidArgument. Only a definite refusal hides the actions: when the
// probe cannot tell (no node serving clients), they are shown and the API
// still judges each one.

// writeProbeTTL is how long a probe's answer is kept for a token.
const writeProbeTTL = time.Minute

// maxProbed bounds the tokens whose answer is kept.
const maxProbed = 1024

type writeProbes struct {
	mu   sync.Mutex
	seen map[[32]byte]probeAnswer
}

type probeAnswer struct {
	canWrite bool
	at       time.Time
}

// canWrite reports whether the caller's token may act. Without --acl
// everyone may; with it, the API decides through the probe.
func (c *Console) canWrite(r *http.Request) bool {
	tok := token(r)
	if !c.cfg.ACL || tok == "" {
		return !c.cfg.ACL
	}
	key := sha256.Sum256([]byte(tok))
	c.probes.mu.Lock()
	a, ok := c.probes.seen[key]
	c.probes.mu.Unlock()
	if ok && time.Since(a.at) < writeProbeTTL {
		return a.canWrite
	}
	ctx, cancel := context.WithTimeout(withToken(r.Context(), tok), noQuorumTimeout)
	defer cancel()
	_, err := c.svc.CancelSession(ctx, &dexv1.CancelSessionRequest{})
	switch status.Code(err) {
	case codes.PermissionDenied, codes.Unauthenticated:
		a = probeAnswer{canWrite: false, at: time.Now()}
	case codes.InvalidArgument:
		a = probeAnswer{canWrite: true, at: time.Now()}
	default:
		return true // unknown now: show the actions, ask again next time
	}
	c.probes.mu.Lock()
	if c.probes.seen == nil || len(c.probes.seen) >= maxProbed {
		c.probes.seen = map[[32]byte]probeAnswer{}
	}
	c.probes.seen[key] = a
	c.probes.mu.Unlock()
	return a.canWrite
}
