package wirerules

import (
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// RouteKind says where a call of a partitioned cluster is served. The
// cluster routes every call by it, and a library uses it to send a call
// straight to the node that serves it.
type RouteKind int

const (
	// BySession: the partition of the session the request names.
	BySession RouteKind = iota
	// ByStep: the partition of the session the request's Step id names.
	ByStep
	// ByAttempt: as ByStep, with the Step id in the request's AttemptRef.
	ByAttempt
	// Create: a child goes to its parent's partition, a root session to
	// its id's, and a session without an id to a partition the receiving
	// node leads when it leads one.
	Create
	// Polled: the partition in the call's dex-partition metadata (absent:
	// 0): a Worker's poll, a backup or a restore of one partition, a
	// transfer of its leadership.
	Polled
	// Registry: partition 0, which holds the cluster-wide records.
	Registry
	// Local: the receiving node answers from what it holds, for the
	// partition the call's dex-partition metadata names (absent: 0).
	Local
	// EveryPartition: partition 0 first, then each other in order; the
	// answer is partition 0's.
	EveryPartition
	// Merged: every partition answers, and the answers are merged.
	Merged
	// Members: a membership change, made in every partition's group:
	// partition 0 first for a join (its nodes table is the member list),
	// last for a removal; the answer is partition 0's.
	Members
	// Imported: the partition of the session an imported archive holds,
	// read from the whole object.
	Imported
	// Bulk: a bulk job (docs/bulk.md), made in every partition under one
	// job id the receiving node draws; the answers are summed.
	Bulk
)

// Route is how one method is routed. Field is the field number of the id
// the kind reads (for Create: the session id; the parent is ParentField).
type Route struct {
	Kind  RouteKind
	Field protoreflect.FieldNumber
}

// ParentField is CreateSessionRequest.parent_id.
const ParentField protoreflect.FieldNumber = 2

// Routes is every method a partitioned cluster serves, and how. A method
// not listed is refused, so a new one is routed on purpose.
var Routes = map[string]Route{
	"/dex.v1.SessionService/CreateSession":    {Kind: Create, Field: 1},
	"/dex.v1.SessionService/SendMessage":      {Kind: BySession, Field: 1},
	"/dex.v1.SessionService/GetSession":       {Kind: BySession, Field: 1},
	"/dex.v1.SessionService/ListSessions":     {Kind: Merged},
	"/dex.v1.SessionService/WatchSession":     {Kind: BySession, Field: 1},
	"/dex.v1.SessionService/ResolveApproval":  {Kind: ByStep, Field: 1},
	"/dex.v1.SessionService/AnswerQuestion":   {Kind: ByStep, Field: 1},
	"/dex.v1.SessionService/ResumeSession":    {Kind: BySession, Field: 1},
	"/dex.v1.SessionService/ReconcileOutcome": {Kind: ByStep, Field: 1},
	"/dex.v1.SessionService/DeleteSession":    {Kind: BySession, Field: 1},
	"/dex.v1.SessionService/EditHistory":      {Kind: BySession, Field: 1},
	"/dex.v1.SessionService/CancelSession":    {Kind: BySession, Field: 1},
	"/dex.v1.SessionService/CloseSession":     {Kind: BySession, Field: 1},
	"/dex.v1.SessionService/ImportSession":    {Kind: Imported},
	"/dex.v1.SessionService/SetBudget":        {Kind: BySession, Field: 1},
	"/dex.v1.SessionService/SetLabels":        {Kind: BySession, Field: 1},
	// A fork lives in its source's partition (field 1 names the source).
	"/dex.v1.SessionService/ForkSession": {Kind: BySession, Field: 1},
	// A bulk job acts in every partition, each on its own sessions.
	"/dex.v1.SessionService/StartBulkAction": {Kind: Bulk},
	"/dex.v1.SessionService/GetBulkJob":      {Kind: Bulk},
	"/dex.v1.SessionService/ListBulkJobs":    {Kind: Bulk},
	"/dex.v1.SessionService/CancelBulkJob":   {Kind: Bulk},

	// Schedules live in partition 0, their sessions too (docs/schedules.md).
	"/dex.v1.ScheduleService/CreateSchedule":  {Kind: Registry},
	"/dex.v1.ScheduleService/GetSchedule":     {Kind: Registry},
	"/dex.v1.ScheduleService/ListSchedules":   {Kind: Registry},
	"/dex.v1.ScheduleService/PauseSchedule":   {Kind: Registry},
	"/dex.v1.ScheduleService/ResumeSchedule":  {Kind: Registry},
	"/dex.v1.ScheduleService/DeleteSchedule":  {Kind: Registry},
	"/dex.v1.ScheduleService/TriggerSchedule": {Kind: Registry},

	"/dex.v1.WorkerService/RegisterWorker":   {Kind: EveryPartition},
	"/dex.v1.WorkerService/PollTask":         {Kind: Polled},
	"/dex.v1.WorkerService/ClaimTask":        {Kind: ByAttempt, Field: 1},
	"/dex.v1.WorkerService/Heartbeat":        {Kind: ByAttempt, Field: 1},
	"/dex.v1.WorkerService/AppendOutput":     {Kind: ByAttempt, Field: 1},
	"/dex.v1.WorkerService/AppendOutputs":    {Kind: Polled},
	"/dex.v1.WorkerService/ReportTask":       {Kind: ByAttempt, Field: 1},
	"/dex.v1.WorkerService/CompleteTask":     {Kind: ByAttempt, Field: 1},
	"/dex.v1.WorkerService/FailTask":         {Kind: ByAttempt, Field: 1},
	"/dex.v1.WorkerService/DeregisterWorker": {Kind: EveryPartition},

	"/dex.v1.AdminService/Status":             {Kind: Local},
	"/dex.v1.AdminService/NodeState":          {Kind: Local},
	"/dex.v1.AdminService/RegisterNode":       {Kind: Registry},
	"/dex.v1.AdminService/TransferLeadership": {Kind: Polled},
	"/dex.v1.AdminService/Join":               {Kind: Members},
	"/dex.v1.AdminService/RemoveNode":         {Kind: Members},
	"/dex.v1.AdminService/SaveSnapshot":       {Kind: Polled},
	"/dex.v1.AdminService/RestoreSnapshot":    {Kind: Polled},
	"/dex.v1.AdminService/CreateToken":        {Kind: Registry},
	"/dex.v1.AdminService/ListTokens":         {Kind: Registry},
	"/dex.v1.AdminService/RevokeToken":        {Kind: Registry},
	"/dex.v1.AdminService/BootstrapACL":       {Kind: Registry},
	"/dex.v1.AdminService/ListWorkers":        {Kind: Registry},
}

// SessionOfRequest is the session whose partition serves a call of route
// r with request req: the session, the Step's session, or for a create the
// parent or the new id. ok is false for a route that names no session and
// for a request whose id is missing or malformed (the cluster refuses it
// with its own words, wherever it lands).
func (r Route) SessionOfRequest(req proto.Message) (session string, ok bool) {
	m := req.ProtoReflect()
	switch r.Kind {
	case BySession:
		session = stringOf(m, r.Field)
	case ByStep:
		session, _, ok = ParseStepID(stringOf(m, r.Field))
	case ByAttempt:
		if fd := m.Descriptor().Fields().ByNumber(r.Field); fd != nil && fd.Message() != nil && m.Has(fd) {
			session, _, ok = ParseStepID(stringOf(m.Get(fd).Message(), 1))
		}
	case Create:
		if session = stringOf(m, ParentField); session == "" {
			session = stringOf(m, r.Field)
		}
	}
	return session, session != ""
}

func stringOf(m protoreflect.Message, num protoreflect.FieldNumber) string {
	fd := m.Descriptor().Fields().ByNumber(num)
	if fd == nil || fd.Kind() != protoreflect.StringKind {
		return ""
	}
	return m.Get(fd).String()
}

// StepID is the id of a session's Step number n: "SESSION-sN".
func StepID(sessionID string, n uint64) string {
	return sessionID + "-s" + strconv.FormatUint(n, 10)
}

// ParseStepID splits a Step id into its session and number; ok is false for
// anything StepID does not write.
func ParseStepID(id string) (sessionID string, n uint64, ok bool) {
	i := strings.LastIndex(id, "-s")
	if i <= 0 {
		return "", 0, false
	}
	n, err := strconv.ParseUint(id[i+2:], 10, 64)
	if err != nil || StepID(id[:i], n) != id {
		return "", 0, false
	}
	return id[:i], n, true
}

// The trailers a node of a partitioned cluster sets on a call it routed:
// PartitionsTrailer, the partition count, on every call routed by its
// session, Step or partition; LeaderTrailer, the gRPC address of the
// partition's leader, on a call it forwarded there. A library that routes
// calls itself learns both from them (docs/design/partitions.md,
// "Partition map"). LeaderTrailer is not a follower's "dex-leader", which
// says that nothing was applied: a forwarded call may have been.
const (
	PartitionsTrailer = "dex-partitions"
	LeaderTrailer     = "dex-partition-leader"
)
