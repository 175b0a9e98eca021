package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

func TestAgents_BadAgentsAreRefusedAndAGoodOneIsShown(t *testing.T) {
	_, _, conn := serveSingleNode(t, Options{Dispatch: noTasks{}, Deadlines: noDeadlines{}})
	c, wk := dexv1.NewSessionServiceClient(conn), dexv1.NewWorkerServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bad := func(what string, err error) {
		t.Helper()
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "agent") {
			t.Errorf("%s: %v; want InvalidArgument about the agent", what, err)
		}
	}
	for _, agent := range []string{"bot/1", "bot 1", strings.Repeat("b", 201), "a..b"} {
		_, err := c.CreateSession(ctx, &dexv1.CreateSessionRequest{SessionId: "s", Agent: agent, Message: "hi"})
		bad("create with agent "+agent[:min(len(agent), 10)], err)
	}
	_, err := wk.RegisterWorker(ctx, &dexv1.RegisterWorkerRequest{WorkerId: "w", RunsModel: true, Agents: []string{"ok", ""}})
	bad("register an empty agent", err)
	_, err = wk.RegisterWorker(ctx, &dexv1.RegisterWorkerRequest{WorkerId: "w", Tools: []*dexv1.ToolSpec{
		{Name: "t", Access: dexv1.ToolAccess_TOOL_ACCESS_READ, Agents: []string{"x/y"}},
	}})
	bad("register a tool for a bad agent", err)
	if list, err := c.ListSessions(ctx, &dexv1.ListSessionsRequest{}); err != nil || len(list.Sessions) != 0 {
		t.Fatalf("sessions after the refusals: %v, %v; want none", list, err)
	}

	created, err := c.CreateSession(ctx, &dexv1.CreateSessionRequest{SessionId: "s", Agent: "bot@2", Message: "hi"})
	if err != nil || created.Session.Agent != "bot@2" {
		t.Fatalf("create with bot@2: %v, %v", created, err)
	}
	list, err := c.ListSessions(ctx, &dexv1.ListSessionsRequest{})
	if err != nil || len(list.Sessions) != 1 || list.Sessions[0].Agent != "bot@2" {
		t.Fatalf("list: %v, %v; want s of bot@2", list, err)
	}
	got, err := c.GetSession(ctx, &dexv1.GetSessionRequest{SessionId: "s"})
	if err != nil || len(got.Steps) != 1 {
		t.Fatalf("get: %v, %v", got, err)
	}
	if st := got.Steps[0]; st.Agent != "bot@2" || !strings.Contains(st.WaitingReason, `no live Worker serves agent "bot@2"`) {
		t.Fatalf("queued RunModel: agent %q, waiting reason %q", st.Agent, st.WaitingReason)
	}
	// A Worker of bot@2 registers: the Step no longer waits for one.
	if _, err := wk.RegisterWorker(ctx, &dexv1.RegisterWorkerRequest{WorkerId: "w", RunsModel: true, Agents: []string{"bot@2"}}); err != nil {
		t.Fatal(err)
	}
	got, err = c.GetSession(ctx, &dexv1.GetSessionRequest{SessionId: "s"})
	if err != nil || got.Steps[0].WaitingReason != "" {
		t.Fatalf("waiting reason with a Worker of bot@2: %q, %v", got.GetSteps()[0].GetWaitingReason(), err)
	}
}
