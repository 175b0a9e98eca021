package server

import (
	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// apiSteps is a page of stored Steps as the API shows them: each queued
// Step that no live Worker serves says why it waits (e.g. no live Worker
// serves its agent).
func apiSteps(st *fsm.State, steps []*fsmpb.Step) []*dexv1.Step {
	out := make([]*dexv1.Step, len(steps))
	for i, s := range steps {
		out[i] = s.API()
		out[i].WaitingReason = st.WaitingReason(s)
	}
	return out
}
