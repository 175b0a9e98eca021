package console

import (
	"context"
	"strings"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/wirerules"
)

// The pages show partitions only in a cluster of more than one. The count
// comes from this node's Status (one entry per partition), asked with the
// caller's token at most once per page, and is kept once a Status gives it:
// it is fixed when the cluster is bootstrapped, and the Admin channel is
// this node, whose groups do not change while it runs. A Status that fails
// (a token that may not ask, a node that cannot answer) leaves it unknown,
// and a page that does not know it shows no partition, as dexctl does.

// sessionStatusWait bounds the Status a session page asks for its
// partition's leader.
const sessionStatusWait = 300 * time.Millisecond

// knownPartitions is the count a Status gave, 0 while none did.
func (c *Console) knownPartitions() int {
	return int(c.partitions.Load())
}

// notePartitions keeps the count of st, when it gives one.
func (c *Console) notePartitions(st *dexv1.StatusResponse) {
	if n := len(st.GetPartitions()); n > 0 {
		c.partitions.Store(int32(n))
	}
}

// partitionCount is the cluster's number of partitions, asking Status only
// while it is unknown; 0 when it stays unknown.
func (c *Console) partitionCount(ctx context.Context) int {
	if n := c.knownPartitions(); n > 0 {
		return n
	}
	st, err := c.admin.Status(ctx, &dexv1.StatusRequest{})
	if err != nil {
		return 0
	}
	c.notePartitions(st)
	return len(st.Partitions)
}

// partitionView is a session's partition as its page shows it.
type partitionView struct {
	ID int
	Of int
	// Status is the partition's entry in this node's Status: its leader
	// (nil when Status did not answer).
	Status *dexv1.PartitionStatus
}

// sessionPartition is the partition session id lives in, with its leader
// from Status; nil in a cluster of one partition, or while the count is
// unknown. Status is not asked once the cluster is known to have one
// partition; otherwise it is, since leaders change. A child lives in its
// parent's partition, which is its own id's: the cluster refuses a chosen
// child id that hashes elsewhere and draws generated ones to match.
func (c *Console) sessionPartition(ctx context.Context, id string) *partitionView {
	n := c.knownPartitions()
	if n == 1 {
		return nil
	}
	// The leader is a nicety: a node that does not answer must not hold the
	// page (Status waits up to a second for each node).
	ctx, cancel := context.WithTimeout(ctx, sessionStatusWait)
	defer cancel()
	st, err := c.admin.Status(ctx, &dexv1.StatusRequest{})
	if err == nil {
		c.notePartitions(st)
		n = c.knownPartitions()
	}
	if n <= 1 {
		return nil
	}
	v := &partitionView{ID: wirerules.PartitionOf(id, n), Of: n}
	for _, p := range st.GetPartitions() {
		if int(p.Id) == v.ID {
			v.Status = p
		}
	}
	return v
}

// nodeList is node ids as one text, "—" for none.
func nodeList(ids []string) string {
	if len(ids) == 0 {
		return "—"
	}
	return strings.Join(ids, ", ")
}
