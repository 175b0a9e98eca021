package fsm

import "github.com/dexhq/dex/fsm/fsmpb"

// A Batch entry is the leader's group commit: the commands proposed while
// the previous entry was being written travel in one log entry, so raft's
// per-entry costs (the log write, the AppendEntries encoding, the follower's
// decoding) are paid once for all of them. ApplyBatch unpacks it; each
// command applies as an entry of its own would, at the entry's index.

// LogVersion is the newest log entry format this build applies: 2 reads
// Batch entries, 3 SetTurnFolding, FoldTurns and the ImportSession commands,
// 4 ForkSessionBegin and ForkSessionEnd, 5 the bulk jobs' and the schedules' commands. A node records it in its
// NodeInfo; a leader writes an entry of a version only once every member
// recorded that version or a newer one, so in a rolling upgrade no member
// meets an entry it cannot apply.
const LogVersion = 5

// The log versions that brought entry formats in.
const (
	BatchLogVersion  = 2
	FoldLogVersion   = 3
	ImportLogVersion = 3
	// ForkLogVersion is in fork.go, ScheduleLogVersion in schedules.go.
	BulkLogVersion = 5
)

// EncodeBatch turns encoded commands (Encode's) into the bytes of one log
// entry that applies them in order.
func EncodeBatch(cmds [][]byte) ([]byte, error) {
	return (&fsmpb.Command{Body: &fsmpb.Command_Batch{Batch: &fsmpb.Batch{Commands: cmds}}}).MarshalVT()
}

// nestedBatch refuses a Batch inside a Batch: ApplyBatch unpacks only the
// entry's own.
func (a *applier) nestedBatch(*fsmpb.Batch) *Result {
	return rejected(reject(CodeInvalid, "a batch inside a batch entry"))
}
