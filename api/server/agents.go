package server

import (
	"google.golang.org/protobuf/proto"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/fsm"
)

// withWaitingReasons says, on each queued Step of a page that no live
// Worker serves, why it waits (e.g. no live Worker serves its agent). The
// state's rows are shared: a Step with a reason is replaced by a copy.
func withWaitingReasons(st *fsm.State, steps []*dexv1.Step) {
	for i, s := range steps {
		if why := st.WaitingReason(s); why != "" {
			c := proto.Clone(s).(*dexv1.Step)
			c.WaitingReason = why
			steps[i] = c
		}
	}
}
