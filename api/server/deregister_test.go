package server

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// A Worker that stops cleanly deregisters itself: it leaves the Workers at
// once, its tool leaves the catalog, and a repeat is OK.
func TestDeregisterWorker_RemovesTheWorkerAndItsTools(t *testing.T) {
	node, _, conn := serveSingleNode(t, Options{Dispatch: noTasks{}, Deadlines: noDeadlines{}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w := dexv1.NewWorkerServiceClient(conn)
	resp, err := w.RegisterWorker(ctx, &dexv1.RegisterWorkerRequest{WorkerId: "w1", Tools: []*dexv1.ToolSpec{
		{Name: "lookup", Access: dexv1.ToolAccess_TOOL_ACCESS_READ},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.NodeId != "n1" || resp.NodeAddress != node.Info().GrpcAddress {
		t.Fatalf("registered by %q at %q; want n1 at %s", resp.NodeId, resp.NodeAddress, node.Info().GrpcAddress)
	}
	if node.State().Worker("w1") == nil {
		t.Fatal("w1 is not registered")
	}

	if _, err := w.DeregisterWorker(ctx, &dexv1.DeregisterWorkerRequest{WorkerId: "w1"}); err != nil {
		t.Fatal(err)
	}
	if node.State().Worker("w1") != nil {
		t.Fatal("w1 is still registered after it deregistered")
	}
	for _, tool := range node.State().Tools() {
		if tool.Name == "lookup" {
			t.Fatal("lookup is still in the catalog; no Worker serves it")
		}
	}
	if _, err := w.DeregisterWorker(ctx, &dexv1.DeregisterWorkerRequest{WorkerId: "w1"}); err != nil {
		t.Fatalf("a repeat: %v; want OK", err)
	}
	if _, err := w.DeregisterWorker(ctx, &dexv1.DeregisterWorkerRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("no worker id: %v; want InvalidArgument", err)
	}
	// The same command as the TTL's: a stale epoch is refused.
	res, err := node.Propose(ctx, &fsmpb.Command{Body: &fsmpb.Command_DeregisterWorker{DeregisterWorker: &fsmpb.DeregisterWorker{WorkerId: "w1", Epoch: 0}}})
	if err != nil || res.Err == nil {
		t.Fatalf("stale epoch: %v %v; want refused", err, res)
	}
}
