//go:build soakdefect

package fsm

import (
	"github.com/dexhq/dex/fsm/fsmpb"
)

// A deliberately broken build (go build -tags soakdefect) that shows the
// soak's checker at work: a single-attempt tool's Step gets three
// attempts, so a failed attempt runs its side effect again. Never ship it.
func init() {
	for _, k := range kindTable {
		if k.Kind == fsmpb.StepKind_STEP_KIND_CALL_SINGLE_ATTEMPT_TOOL {
			k.Attempts = func(*fsmpb.ToolSpec) uint32 { return 3 }
		}
	}
}
