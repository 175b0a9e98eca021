package fsm

import (
	"testing"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// Every Step kind of the protocol has one row, and a row says all that a
// dispatched kind needs: a handler, a result, attempts, success and failure.
func TestKinds_EveryKindHasOneCompleteRow(t *testing.T) {
	seen := map[string]bool{}
	for v := range fsmpb.StepKind_name {
		k := fsmpb.StepKind(v)
		if k == fsmpb.StepKind_STEP_KIND_UNSPECIFIED {
			continue
		}
		spec := Kind(k)
		if spec == unknownKind || spec.Kind != k {
			t.Fatalf("%s has no row", k)
		}
		if seen[spec.Name] {
			t.Fatalf("two kinds are named %s", spec.Name)
		}
		seen[spec.Name] = true
		if !spec.Dispatched() {
			if spec.Result != nil || spec.succeeded != nil || spec.failed != nil || spec.Attempts(nil) != 0 {
				t.Fatalf("%s waits in the cluster but has Worker behaviour", spec.Name)
			}
			continue
		}
		if spec.Handler == HandlerNone || spec.Result == nil || spec.succeeded == nil || spec.failed == nil {
			t.Fatalf("%s is dispatched but its row is incomplete", spec.Name)
		}
		if spec.Attempts(&fsmpb.ToolSpec{Access: fsmpb.ToolAccess_TOOL_ACCESS_READ}) == 0 {
			t.Fatalf("%s is dispatched with no attempt", spec.Name)
		}
	}
	if Kind(fsmpb.StepKind(99)).Dispatched() || KindName(fsmpb.StepKind(99)) != "Unknown" {
		t.Fatal("an unknown kind is dispatched or named")
	}
}

func TestKinds_AttemptsFollowThePolicy(t *testing.T) {
	single := &fsmpb.ToolSpec{Access: fsmpb.ToolAccess_TOOL_ACCESS_SINGLE_ATTEMPT, MaxAttempts: 5}
	read := &fsmpb.ToolSpec{Access: fsmpb.ToolAccess_TOOL_ACCESS_READ, MaxAttempts: 5}
	for _, c := range []struct {
		kind   fsmpb.StepKind
		policy *fsmpb.ToolSpec
		want   uint32
	}{
		{kRunModel, nil, ModelMaxAttempts},
		{kCompact, nil, ModelMaxAttempts},
		{kSingle, single, 1},
		{kCallTool, read, 5},
		{kCallTool, &fsmpb.ToolSpec{Access: fsmpb.ToolAccess_TOOL_ACCESS_IDEMPOTENT_WRITE}, DefaultToolAttempts},
		{fsmpb.StepKind_STEP_KIND_POLL_TOOL_TASK, single, 5}, // polling runs no side effect
	} {
		if got := Kind(c.kind).Attempts(c.policy); got != c.want {
			t.Fatalf("%s under %v: %d attempts; want %d", KindName(c.kind), c.policy, got, c.want)
		}
	}
}
