package client

import (
	"context"
	"sync"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// flakyConn answers the first `down` PollTask calls Unavailable, as during a
// takeover, then an empty poll.
type flakyConn struct {
	mu   sync.Mutex
	down int
}

func (c *flakyConn) Invoke(_ context.Context, method string, _, reply any, _ ...grpc.CallOption) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if method == dexv1.WorkerService_PollTask_FullMethodName && c.down > 0 {
		c.down--
		return status.Error(codes.Unavailable, "connection refused")
	}
	return nil
}

func (c *flakyConn) NewStream(context.Context, *grpc.StreamDesc, string, ...grpc.CallOption) (grpc.ClientStream, error) {
	return nil, status.Error(codes.Unimplemented, "no streams")
}

// A Worker that loses the cluster says so once at info, and once when it is
// back; the failed tries in between stay at debug.
func TestWorkerLogsALostAndARegainedConnectionAtInfo(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	w, err := NewWorker(&flakyConn{down: 3}, WorkerOptions{ID: "w1", Logger: zap.New(core), Tools: []Tool{writeTool("t", func(context.Context, ToolCall) (ToolResult, error) { return ToolResult{}, nil })}})
	if err != nil {
		t.Fatal(err)
	}
	w.poll(context.Background(), &poller{}, 1)
	var info []string
	for _, e := range logs.All() {
		if e.Level == zapcore.InfoLevel {
			info = append(info, e.Message)
		}
	}
	if len(info) != 2 || info[0] != "lost the connection to the cluster; reconnecting" || info[1] != "reconnected to the cluster" {
		t.Fatalf("info lines %q; want one lost and one reconnected", info)
	}
	if n := logs.FilterMessage("poll: cluster still not reachable").Len(); n != 2 {
		t.Fatalf("%d debug lines for the later failed tries; want 2", n)
	}
}
