package server

import (
	"fmt"
	"strconv"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/dexhq/dex/api/wirerules"
	"github.com/dexhq/dex/cluster"
	"github.com/dexhq/dex/fsm/store"
)

// PartitionMetadataKey names, on a Worker's PollTask, the partition it
// polls (absent: 0), and on a forwarded call, the partition the sender
// routed it to.
const PartitionMetadataKey = cluster.PartitionMetadataKey

// forwardedMetadataKey marks a call one node forwarded to another: the
// receiver serves it itself or refuses it, and never forwards it again.
const forwardedMetadataKey = "dex-forwarded-by"

// routeKind says where a call of a partitioned cluster is served.
type routeKind int

const (
	// bySession: the partition of the session the request names.
	bySession routeKind = iota
	// byStep: the partition of the session the request's Step id names.
	byStep
	// byAttempt: as byStep, with the Step id in the request's AttemptRef.
	byAttempt
	// create: a child goes to its parent's partition, a root session to
	// its id's, and a session without an id to a partition this node
	// leads when it leads one.
	create
	// polled: the partition in the call's dex-partition metadata (absent:
	// 0): a Worker's poll, a backup or a restore of one partition, a
	// transfer of its leadership.
	polled
	// registry: partition 0, which holds the cluster-wide records.
	registry
	// local: this node answers from what it holds, for the partition the
	// call's dex-partition metadata names (absent: 0).
	local
	// everyPartition: partition 0 first, then each other in order; the
	// answer is partition 0's.
	everyPartition
	// merged: every partition answers, and the answers are merged.
	merged
	// members: a membership change, made in every partition's group:
	// partition 0 first for a join (its nodes table is the member list),
	// last for a removal; the answer is partition 0's.
	members
	// imported: the partition of the session an imported archive holds,
	// read from the whole object.
	imported
)

// route is how one method is routed. field is the field number of the id
// the kind reads (for create: the session id; the parent is parentField).
type route struct {
	kind  routeKind
	field protowire.Number
}

const parentField protowire.Number = 2 // CreateSessionRequest.parent_id

// routes is every method a partitioned node serves, and how. A method not
// listed is refused, so a new one is routed on purpose.
var routes = map[string]route{
	"/dex.v1.SessionService/CreateSession":    {kind: create, field: 1},
	"/dex.v1.SessionService/SendMessage":      {kind: bySession, field: 1},
	"/dex.v1.SessionService/GetSession":       {kind: bySession, field: 1},
	"/dex.v1.SessionService/ListSessions":     {kind: merged},
	"/dex.v1.SessionService/WatchSession":     {kind: bySession, field: 1},
	"/dex.v1.SessionService/ResolveApproval":  {kind: byStep, field: 1},
	"/dex.v1.SessionService/AnswerQuestion":   {kind: byStep, field: 1},
	"/dex.v1.SessionService/ResumeSession":    {kind: bySession, field: 1},
	"/dex.v1.SessionService/ReconcileOutcome": {kind: byStep, field: 1},
	"/dex.v1.SessionService/DeleteSession":    {kind: bySession, field: 1},
	"/dex.v1.SessionService/EditHistory":      {kind: bySession, field: 1},
	"/dex.v1.SessionService/CancelSession":    {kind: bySession, field: 1},
	"/dex.v1.SessionService/CloseSession":     {kind: bySession, field: 1},
	"/dex.v1.SessionService/ImportSession":    {kind: imported},

	"/dex.v1.WorkerService/RegisterWorker":   {kind: everyPartition},
	"/dex.v1.WorkerService/PollTask":         {kind: polled},
	"/dex.v1.WorkerService/ClaimTask":        {kind: byAttempt, field: 1},
	"/dex.v1.WorkerService/Heartbeat":        {kind: byAttempt, field: 1},
	"/dex.v1.WorkerService/ReportTask":       {kind: byAttempt, field: 1},
	"/dex.v1.WorkerService/CompleteTask":     {kind: byAttempt, field: 1},
	"/dex.v1.WorkerService/FailTask":         {kind: byAttempt, field: 1},
	"/dex.v1.WorkerService/DeregisterWorker": {kind: everyPartition},

	"/dex.v1.AdminService/Status":             {kind: local},
	"/dex.v1.AdminService/NodeState":          {kind: local},
	"/dex.v1.AdminService/RegisterNode":       {kind: registry},
	"/dex.v1.AdminService/TransferLeadership": {kind: polled},
	"/dex.v1.AdminService/Join":               {kind: members},
	"/dex.v1.AdminService/RemoveNode":         {kind: members},
	"/dex.v1.AdminService/SaveSnapshot":       {kind: polled},
	"/dex.v1.AdminService/RestoreSnapshot":    {kind: polled},
	"/dex.v1.AdminService/CreateToken":        {kind: registry},
	"/dex.v1.AdminService/ListTokens":         {kind: registry},
	"/dex.v1.AdminService/RevokeToken":        {kind: registry},
	"/dex.v1.AdminService/BootstrapACL":       {kind: registry},
	"/dex.v1.AdminService/ListWorkers":        {kind: registry},
}

// partitionOf is the partition, of n, that a call of route r with first
// message raw and metadata md goes to; pick chooses one for a session
// that names no id.
func (r route) partitionOf(raw []byte, md metadata.MD, n int, pick func() int) (k int, err error) {
	switch r.kind {
	case bySession:
		return wirerules.PartitionOf(stringField(raw, r.field), n), nil
	case byStep, byAttempt:
		msg := raw
		if r.kind == byAttempt {
			msg = messageField(raw, r.field)
		}
		step := stringField(msg, 1)
		session, _, ok := store.ParseStepID(step)
		if !ok {
			// The handler refuses the id with its own message.
			return 0, nil
		}
		return wirerules.PartitionOf(session, n), nil
	case create:
		if parent := stringField(raw, parentField); parent != "" {
			return wirerules.PartitionOf(parent, n), nil
		}
		if id := stringField(raw, r.field); id != "" {
			return wirerules.PartitionOf(id, n), nil
		}
		return pick(), nil
	case polled:
		return polledPartition(md, n)
	case local:
		return polledPartition(md, n)
	case registry:
		return 0, nil
	}
	return 0, fmt.Errorf("route kind %d names no partition", r.kind)
}

// polledPartition reads a PollTask's dex-partition metadata.
func polledPartition(md metadata.MD, n int) (int, error) {
	v := md.Get(PartitionMetadataKey)
	if len(v) == 0 {
		return 0, nil
	}
	k, err := strconv.Atoi(v[0])
	if err != nil || k < 0 || k >= n {
		return 0, fmt.Errorf("%s %q: this cluster has partitions 0 to %d", PartitionMetadataKey, v[0], n-1)
	}
	return k, nil
}

// stringField is the last value of string field num in a message's wire
// bytes ("" when absent or unreadable: the handler then refuses the
// request with its own words).
func stringField(b []byte, num protowire.Number) string {
	return string(bytesField(b, num))
}

// messageField is the wire bytes of message field num (nil when absent).
func messageField(b []byte, num protowire.Number) []byte { return bytesField(b, num) }

func bytesField(b []byte, num protowire.Number) []byte {
	var out []byte
	for len(b) > 0 {
		n, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return nil
		}
		b = b[l:]
		if n == num && typ == protowire.BytesType {
			v, l := protowire.ConsumeBytes(b)
			if l < 0 {
				return nil
			}
			out, b = v, b[l:]
			continue
		}
		l = protowire.ConsumeFieldValue(n, typ, b)
		if l < 0 {
			return nil
		}
		b = b[l:]
	}
	return out
}
