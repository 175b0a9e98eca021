package server

import (
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/wirerules"
	"github.com/dexhq/dex/fsm/store"
)

func wire(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Each kind of call reaches the partition of the session it names, read
// from the request's wire bytes.
func TestRoutesFindTheSessionsPartition(t *testing.T) {
	const n = 5
	root, parent := "ses-root", "ses-parent"
	step := store.StepID(root, 7)
	never := func() int { t.Fatal("picked a partition for a call that names its session"); return 0 }
	for _, c := range []struct {
		method string
		req    proto.Message
		want   int
	}{
		{"/dex.v1.SessionService/GetSession", &dexv1.GetSessionRequest{SessionId: root, HistoryLimit: 3}, wirerules.PartitionOf(root, n)},
		{"/dex.v1.SessionService/SendMessage", &dexv1.SendMessageRequest{SessionId: root, Text: "hi", IdempotencyKey: "k"}, wirerules.PartitionOf(root, n)},
		{"/dex.v1.SessionService/CreateSession", &dexv1.CreateSessionRequest{SessionId: root}, wirerules.PartitionOf(root, n)},
		{"/dex.v1.SessionService/CreateSession", &dexv1.CreateSessionRequest{SessionId: root, ParentId: parent}, wirerules.PartitionOf(parent, n)},
		{"/dex.v1.SessionService/ResolveApproval", &dexv1.ResolveApprovalRequest{StepId: step, Approved: true}, wirerules.PartitionOf(root, n)},
		{"/dex.v1.WorkerService/CompleteTask", &dexv1.CompleteTaskRequest{Ref: &dexv1.AttemptRef{StepId: step, Attempt: 2, Token: "t"}}, wirerules.PartitionOf(root, n)},
		{"/dex.v1.WorkerService/Heartbeat", &dexv1.HeartbeatRequest{Ref: &dexv1.AttemptRef{StepId: step}}, wirerules.PartitionOf(root, n)},
	} {
		got, err := partitionOf(wirerules.Routes[c.method], wire(t, c.req), nil, n, never)
		if err != nil || got != c.want {
			t.Errorf("%s %v: partition %d (%v), want %d", c.method, c.req, got, err, c.want)
		}
	}
	if wirerules.PartitionOf(root, n) == wirerules.PartitionOf(parent, n) {
		t.Fatal("pick ids of different partitions: the parent case proves nothing")
	}
}

// A session that names no id goes where pick says; a poll to the
// partition its metadata names, and a bad one is refused.
func TestRoutesOfCallsThatNameNoSession(t *testing.T) {
	got, err := partitionOf(wirerules.Routes["/dex.v1.SessionService/CreateSession"], wire(t, &dexv1.CreateSessionRequest{Message: "hi"}), nil, 3, func() int { return 2 })
	if err != nil || got != 2 {
		t.Fatalf("create without an id: %d %v, want the picked 2", got, err)
	}
	poll := wirerules.Routes["/dex.v1.WorkerService/PollTask"]
	for _, c := range []struct {
		md   metadata.MD
		want int
		err  string
	}{
		{nil, 0, ""},
		{metadata.Pairs(PartitionMetadataKey, "2"), 2, ""},
		{metadata.Pairs(PartitionMetadataKey, "3"), 0, `dex-partition "3": this cluster has partitions 0 to 2`},
		{metadata.Pairs(PartitionMetadataKey, "x"), 0, `dex-partition "x"`},
	} {
		got, err := partitionOf(poll, nil, c.md, 3, nil)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("poll %v: %d %v, want the error %q", c.md, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("poll %v: %d %v, want %d", c.md, got, err, c.want)
		}
	}
}

// Every method of every service a node serves is routed on purpose.
func TestEveryMethodHasARoute(t *testing.T) {
	for _, desc := range []struct {
		name    string
		methods []string
	}{
		{dexv1.SessionService_ServiceDesc.ServiceName, methodNames(dexv1.SessionService_ServiceDesc.Methods, dexv1.SessionService_ServiceDesc.Streams)},
		{dexv1.WorkerService_ServiceDesc.ServiceName, methodNames(dexv1.WorkerService_ServiceDesc.Methods, dexv1.WorkerService_ServiceDesc.Streams)},
		{dexv1.AdminService_ServiceDesc.ServiceName, methodNames(dexv1.AdminService_ServiceDesc.Methods, dexv1.AdminService_ServiceDesc.Streams)},
	} {
		for _, m := range desc.methods {
			if _, ok := wirerules.Routes["/"+desc.name+"/"+m]; !ok {
				t.Errorf("/%s/%s has no route", desc.name, m)
			}
		}
	}
}

func methodNames(ms []grpc.MethodDesc, ss []grpc.StreamDesc) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.MethodName)
	}
	for _, s := range ss {
		out = append(out, s.StreamName)
	}
	return out
}

// Every method made in several partitions names the answer it decodes.
func TestEveryFannedOutMethodHasItsAnswer(t *testing.T) {
	for method, rt := range wirerules.Routes {
		if rt.Kind != wirerules.EveryPartition && rt.Kind != wirerules.Members {
			continue
		}
		answer, ok := fannedOut[method]
		if !ok {
			t.Errorf("%s is made in several partitions and has no answer type", method)
			continue
		}
		if answer() == nil {
			t.Errorf("%s: nil answer", method)
		}
	}
}

// A library routes a call by the same table, from the typed request: for
// every method that names a session or a Step, its partition is the one
// this server reads from the wire bytes.
func TestLibrariesRouteAsTheServerDoes(t *testing.T) {
	const n = 7
	session := "ses-agree"
	checked := 0
	for method, rt := range wirerules.Routes {
		if rt.Kind > wirerules.Create {
			if _, ok := rt.SessionOfRequest(&dexv1.ListSessionsRequest{}); ok {
				t.Errorf("%s names no session, yet a library reads one", method)
			}
			continue
		}
		req := requestOf(t, method)
		fields := req.ProtoReflect().Descriptor().Fields()
		id := session
		if rt.Kind == wirerules.ByStep || rt.Kind == wirerules.ByAttempt {
			id = wirerules.StepID(session, 4)
		}
		if rt.Kind == wirerules.ByAttempt {
			ref := &dexv1.AttemptRef{StepId: id, Attempt: 1}
			req.ProtoReflect().Set(fields.ByNumber(rt.Field), protoreflect.ValueOfMessage(ref.ProtoReflect()))
		} else {
			req.ProtoReflect().Set(fields.ByNumber(rt.Field), protoreflect.ValueOfString(id))
		}
		want, err := partitionOf(rt, wire(t, req), nil, n, func() int { return -1 })
		got, ok := rt.SessionOfRequest(req)
		if err != nil || !ok || wirerules.PartitionOf(got, n) != want || got != session {
			t.Errorf("%s: the library reads session %q (%v), the server partition %d (%v)", method, got, ok, want, err)
		}
		checked++
	}
	if checked < 15 {
		t.Fatalf("checked %d methods; the table routes more by session", checked)
	}
}

// requestOf is a new, empty request of method.
func requestOf(t *testing.T, method string) proto.Message {
	t.Helper()
	svc, name, _ := strings.Cut(strings.TrimPrefix(method, "/"), "/")
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
	if err != nil {
		t.Fatal(err)
	}
	md := d.(protoreflect.ServiceDescriptor).Methods().ByName(protoreflect.Name(name))
	mt, err := protoregistry.GlobalTypes.FindMessageByName(md.Input().FullName())
	if err != nil {
		t.Fatal(err)
	}
	return mt.New().Interface()
}
