package server

import (
	"context"
	"testing"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// contacts is a leader memory of Worker contacts.
type contacts map[string]time.Time

func (c contacts) Contacts() (map[string]time.Time, map[string]int) {
	return c, map[string]int{"w1": 1}
}

func TestListWorkers_ShowsToolsPoliciesContactsAndQueuesPerTool(t *testing.T) {
	seen := time.UnixMilli(1_700_000_000_000)
	node, _, conn := serveSingleNode(t, Options{Dispatch: noTasks{}, Deadlines: noDeadlines{}, Liveness: livenessWith{contacts{"w1": seen}}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	spec := &fsmpb.ToolSpec{Name: "lookup", Access: fsmpb.ToolAccess_TOOL_ACCESS_READ, MaxAttempts: 3}
	if res, err := node.Propose(ctx, &fsmpb.Command{Body: &fsmpb.Command_RegisterWorker{RegisterWorker: &fsmpb.RegisterWorker{
		WorkerId: "w1", RunsModel: true, Tools: []*fsmpb.ToolSpec{spec},
	}}}); err != nil || res.Err != nil {
		t.Fatalf("register: %v %v", err, res.Err)
	}
	c := dexv1.NewSessionServiceClient(conn)
	if _, err := c.CreateSession(ctx, &dexv1.CreateSessionRequest{SessionId: "s", Message: "go"}); err != nil {
		t.Fatal(err)
	}

	got, err := dexv1.NewAdminServiceClient(conn).ListWorkers(ctx, &dexv1.ListWorkersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !got.Leader || got.AnsweredBy != "n1" {
		t.Fatalf("answered by %q leader=%v; want the leader n1", got.AnsweredBy, got.Leader)
	}
	if len(got.Workers) != 1 {
		t.Fatalf("%d workers; want w1", len(got.Workers))
	}
	w := got.Workers[0]
	if w.Worker.Id != "w1" || len(w.Worker.Tools) != 1 || w.Worker.Tools[0].Name != "lookup" || w.Worker.Tools[0].MaxAttempts != 3 {
		t.Fatalf("worker %v; want w1 with lookup (max 3 attempts)", w.Worker)
	}
	if w.LastContactMs != seen.UnixMilli() || w.OpenPolls != 1 {
		t.Fatalf("last contact %d, open polls %d; want %d and 1", w.LastContactMs, w.OpenPolls, seen.UnixMilli())
	}
	byTool := map[string]*dexv1.ToolQueue{}
	for _, q := range got.Tools {
		byTool[q.Tool] = q
	}
	if q := byTool[""]; q == nil || q.Queued != 1 {
		t.Fatalf("model queue %v; want the session's RunModel queued", q)
	}
	if q := byTool["lookup"]; q == nil || q.Queued != 0 || len(q.Workers) != 1 || q.Workers[0] != "w1" {
		t.Fatalf("lookup queue %v; want nothing queued, served by w1", q)
	}

	st, err := dexv1.NewAdminServiceClient(conn).Status(ctx, &dexv1.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Nodes) != 1 || !st.Nodes[0].Ready || st.Nodes[0].ReadyReason != "" {
		t.Fatalf("status nodes %v; want n1 ready", st.Nodes)
	}
}

// livenessWith is a Liveness that also shows its contacts.
type livenessWith struct{ contacts }

func (livenessWith) Touch(string)                 {}
func (livenessWith) Polling(string) (done func()) { return func() {} }
