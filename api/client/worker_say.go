package client

import (
	"fmt"
	"io"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// A Worker that cannot reach the cluster must not look idle: it says why it
// cannot register, again and again with growing gaps, and says where it
// registered. These lines go to the Logger, or to stderr without one.

// firstSayGap and maxSayGap bound the gaps between two "cannot register"
// lines: the first is said at once, the next after firstSayGap, each later
// gap doubles up to maxSayGap.
const (
	firstSayGap = 2 * time.Second
	maxSayGap   = 30 * time.Second
)

// sayEvery spaces repeated lines out.
type sayEvery struct {
	next time.Time
	gap  time.Duration
}

// due reports whether a line is due at now and, if so, when the next is.
func (s *sayEvery) due(now time.Time) bool {
	if now.Before(s.next) {
		return false
	}
	if s.gap == 0 {
		s.gap = firstSayGap
	} else {
		s.gap = min(2*s.gap, maxSayGap)
	}
	s.next = now.Add(s.gap)
	return true
}

// say writes one line about the Worker's registration: to the Logger, or
// to stderr (w.stderr) when none was given.
func (w *Worker) say(level zapcore.Level, msg string, fields ...zap.Field) {
	if w.stderr != nil {
		fmt.Fprintf(w.stderr, "dex worker %s: %s\n", w.opts.ID, msg)
		return
	}
	w.log.Log(level, msg, fields...)
}

// targetOf names the addresses conn dials, for people: the list of a
// dex:/// target or its host:port.
func targetOf(conn grpc.ClientConnInterface) string {
	t, ok := conn.(interface{ Target() string })
	if !ok {
		return "the cluster"
	}
	s := t.Target()
	if strings.HasPrefix(s, Scheme+":") {
		return endpointOf(s)
	}
	if i := strings.Index(s, ":///"); i >= 0 {
		return s[i+len(":///"):]
	}
	return s
}

// whyNot is why a call did not reach the cluster, in a few words: the last
// words of a dial error ("connection refused", "no such host"), or the
// cluster's own answer.
func whyNot(err error) string {
	st := status.Convert(err)
	msg := strings.TrimPrefix(st.Message(), "latest balancer error: ")
	const dialing = "Error while dialing: "
	if i := strings.LastIndex(msg, dialing); i >= 0 {
		msg = strings.TrimRight(msg[i+len(dialing):], `"`)
		if j := strings.LastIndex(msg, ": "); j >= 0 {
			msg = msg[j+2:]
		}
		return msg
	}
	if st.Code() == codes.DeadlineExceeded && strings.Contains(msg, "waiting for connections to become ready") {
		return "no answer yet (still connecting)"
	}
	return msg
}

// registeredLine says where the Worker registered.
func registeredLine(resp *dexv1.RegisterWorkerResponse, target string, after time.Duration, failed bool) string {
	line := "registered with the cluster at " + target
	if resp.NodeId != "" {
		line = fmt.Sprintf("registered with leader %s at %s", resp.NodeId, resp.NodeAddress)
	}
	if failed {
		line += fmt.Sprintf(" after %s", after.Round(time.Second))
	}
	return line
}

// stderrUnlessLogger is where a Worker with no Logger says its lines.
func stderrUnlessLogger(l *zap.Logger, stderr io.Writer) io.Writer {
	if l != nil {
		return nil
	}
	return stderr
}
