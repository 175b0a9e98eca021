package fsm

import (
	"github.com/dexhq/dex/fsm/fsmpb"
)

// maxClusterIDLength bounds the cluster id (Dex makes 32 hex digits).
const maxClusterIDLength = 64

// setClusterID records the cluster's id once. A second SetClusterId with the
// same id is a no-op (a leader may retry it); another id is refused, so two
// leaders that both found none cannot change it under the members.
func (a *applier) setClusterID(c *fsmpb.SetClusterId) *Result {
	id := c.GetClusterId()
	if id == "" {
		return rejected(reject(CodeInvalid, "cluster id is required"))
	}
	if len(id) > maxClusterIDLength {
		return rejected(reject(CodeInvalid, "cluster id is longer than %d bytes", maxClusterIDLength))
	}
	m := a.meta()
	switch m.ClusterId {
	case "":
		m.ClusterId = id
	case id:
	default:
		return rejected(reject(CodeFailedPrecondition, "the cluster id is already %s", m.ClusterId))
	}
	return &Result{}
}
