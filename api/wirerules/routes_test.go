package wirerules

import (
	"testing"

	"google.golang.org/protobuf/proto"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// A library reads the session a call is routed by from the typed request:
// a create names its parent first, and a Step id it cannot parse names
// none (the cluster refuses it wherever it lands).
func TestSessionOfRequest(t *testing.T) {
	for _, c := range []struct {
		method string
		req    proto.Message
		want   string
	}{
		{"/dex.v1.SessionService/CreateSession", &dexv1.CreateSessionRequest{SessionId: "ses-child", ParentId: "ses-parent"}, "ses-parent"},
		{"/dex.v1.SessionService/CreateSession", &dexv1.CreateSessionRequest{SessionId: "ses-root"}, "ses-root"},
		{"/dex.v1.SessionService/CreateSession", &dexv1.CreateSessionRequest{Message: "hi"}, ""},
		{"/dex.v1.SessionService/AnswerQuestion", &dexv1.AnswerQuestionRequest{StepId: StepID("ses-a", 12)}, "ses-a"},
		{"/dex.v1.SessionService/AnswerQuestion", &dexv1.AnswerQuestionRequest{StepId: "ses-a-s012"}, ""},
		{"/dex.v1.WorkerService/FailTask", &dexv1.FailTaskRequest{Ref: &dexv1.AttemptRef{StepId: StepID("ses-b-s2", 3)}}, "ses-b-s2"},
		{"/dex.v1.WorkerService/FailTask", &dexv1.FailTaskRequest{}, ""},
		{"/dex.v1.AdminService/Status", &dexv1.StatusRequest{}, ""},
	} {
		got, ok := Routes[c.method].SessionOfRequest(c.req)
		if got != c.want || ok != (c.want != "") {
			t.Errorf("%s %v: %q %v, want %q", c.method, c.req, got, ok, c.want)
		}
	}
}
