package soak

import (
	"fmt"
	"path/filepath"
	"sort"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/chaos/harness"
)

// The soak's checker: after the run, with every fault healed and the
// cluster quiet, it judges the clients' history, the Workers' ledger and
// the final state read from the leader and from every node's store.

// Violation kinds.
const (
	VLostWrite       = "lost-write"       // an acknowledged write is missing
	VPhantomWrite    = "phantom-write"    // a message no client sent
	VSingleAttempt   = "single-attempt"   // a single-attempt tool ran twice
	VIdempotentKey   = "idempotent-key"   // one call ran under two keys
	VReadAttempts    = "read-attempts"    // a read ran more often than its attempts
	VModelAttempts   = "model-attempts"   // a RunModel ran more often than its attempts (or 3)
	VUnclaimedExec   = "unclaimed-exec"   // a ledger line with no committed, claimed attempt of that Worker
	VDoubleExec      = "double-exec"      // one attempt executed twice
	VPollTask        = "poll-task"        // a long-running call polled two tasks
	VToldTwice       = "told-twice"       // a call (a timer, a tool) has two results in the history
	VDiverged        = "diverged"         // nodes' states differ at the same index
	VNotLinear       = "not-linearizable" // porcupine found no linearization
	VWatchGap        = "watch-gap"        // a watch skipped or repeated a seq
	VRestart         = "restart"          // a node did not come back on its data dir, a snapshot it keeps does not restore, or the restarted cluster serves another state
	VBackup          = "backup"           // a backup could not be saved, inspected or restored, or the restored cluster serves another state
	VCatalog         = "catalog"          // the partitions of a backup hold different tool catalogs or Worker registrations
	VCheckIncomplete = "check-incomplete" // a part of the check could not be run
)

// Violation is one thing the checker found wrong.
type Violation struct {
	Kind    string `json:"kind"`
	Session string `json:"session,omitempty"`
	Detail  string `json:"detail"`
	// Partition: in a cluster of several partitions, the one the
	// violation is in (nil: one partition, or across partitions).
	Partition *int `json:"partition,omitempty"`
}

// CheckInput is what the checker judges.
type CheckInput struct {
	Ops    []Op
	Ledger []harness.LedgerEntry
	// Final: every session as the leader answers at the end.
	Final map[string]*dexv1.GetSessionResponse
	// Digests: each node's state digest at DigestIndex (node id → digest);
	// DigestErr says why they could not be had.
	Digests     map[string]string
	DigestIndex uint64
	DigestErr   string
	// Restart: every node restarted on its data dir after the soak
	// (restart.go); Backups: the backups taken during it, inspected
	// and restored (backup.go).
	Restart *RestartCheck
	Backups []BackupCheck
	// Out: where an illegal history's visualisation goes ("" = nowhere).
	Out string
	// LinearizeTimeout bounds porcupine (default 2 minutes).
	LinearizeTimeout time.Duration
	// Life: the lifecycle mode's facts (nil: sessions are never closed,
	// and one that is gone lost its writes).
	Life *LifecycleInput
	// Partitions: the cluster's number of partitions (0 or 1: one). With
	// several, PartitionDigests holds each partition's node digests in
	// place of Digests and DigestIndex.
	Partitions       int
	PartitionDigests []DigestSet
}

// CheckResult is the checker's verdict.
type CheckResult struct {
	Violations    []Violation `json:"violations"`
	Linearizable  string      `json:"linearizable"`
	Visualization string      `json:"visualization,omitempty"`
	Checked       CheckCounts `json:"checked"`
	// Lifecycle: what the lifecycle checks looked at (lifecycle mode).
	Lifecycle *LifecycleCounts `json:"lifecycle,omitempty"`
	// Partitions: with several, what was checked in each and the
	// violations in it (check_partitions.go).
	Partitions []PartitionCheck `json:"partitions,omitempty"`
}

// CheckCounts says how much the checker looked at.
type CheckCounts struct {
	AckedWrites int `json:"acked_writes"`
	LedgerLines int `json:"ledger_lines"`
	Calls       int `json:"calls"`
	Sessions    int `json:"sessions"`
	Nodes       int `json:"nodes_compared"`
	HistoryOps  int `json:"history_ops"`
	// After the soak: nodes that came back and caught up, the snapshots
	// they keep restored offline, backups restored and served.
	Restarted int `json:"nodes_restarted"`
	Snapshots int `json:"snapshots_restored"`
	Backups   int `json:"backups_restored"`
	// Catalogs: with several partitions, the backups whose partitions
	// were found to hold the same catalog and Worker registrations.
	Catalogs int `json:"catalogs_compared,omitempty"`
}

// Check runs every check.
func Check(in CheckInput) CheckResult {
	var res CheckResult
	add := func(kind, session, format string, args ...any) {
		res.Violations = append(res.Violations, Violation{Kind: kind, Session: session, Detail: fmt.Sprintf(format, args...)})
	}
	res.Checked.Sessions = len(in.Final)
	res.Checked.LedgerLines = len(in.Ledger)
	res.Checked.HistoryOps = len(in.Ops)
	checkAcked(in, &res, add)
	checkLedger(in, &res, add)
	checkToldOnce(in, add)
	checkDigests(in, &res, add)
	checkRecovery(in, &res, add)
	checkLifecycle(in, &res, add)
	for _, op := range in.Ops {
		if op.Kind == OpWatch && op.WatchGap != "" {
			add(VWatchGap, op.Session, "%s", op.WatchGap)
		}
	}
	if in.Partitions > 1 {
		res.Partitions = checkPartitions(in, &res)
	}
	timeout := in.LinearizeTimeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	vis := ""
	if in.Out != "" {
		vis = filepath.Join(in.Out, "linearizability.html")
	}
	lin, err := CheckLinearizable(in.Ops, timeout, vis)
	res.Linearizable, res.Visualization = lin.Result, lin.Visualization
	switch {
	case err != nil:
		add(VCheckIncomplete, "", "linearizability visualisation: %v", err)
	case lin.Result == "Illegal":
		add(VNotLinear, "", "the client history has no linearization (see %s)", orNone(lin.Visualization))
	case lin.Result != "Ok":
		add(VCheckIncomplete, "", "porcupine did not decide within %s", timeout)
	}
	return res
}

func orNone(s string) string {
	if s == "" {
		return "no visualisation kept"
	}
	return s
}

// sessionKeys lists the message ids a session holds (history and inbox).
func sessionKeys(r *dexv1.GetSessionResponse) map[string]bool {
	keys := map[string]bool{}
	for _, h := range r.GetSession().GetHistory() {
		if h.MessageId != "" {
			keys[h.MessageId] = true
		}
	}
	for _, m := range r.GetSession().GetInbox() {
		keys[m.Id] = true
	}
	return keys
}

func checkAcked(in CheckInput, res *CheckResult, add func(kind, session, format string, args ...any)) {
	sessions := judgedSessions(in)
	sent := map[string]bool{}
	for _, op := range in.Ops {
		if op.Key != "" && (op.Kind == OpCreate || op.Kind == OpSend) {
			sent[op.Session+"\x00"+op.Key] = true
		}
		if op.Answer != AnsOK {
			continue
		}
		final := sessions[op.Session]
		if final == nil && in.Life != nil {
			continue // deleted unseen: checkLifecycle judges its deletion
		}
		switch op.Kind {
		case OpCreate, OpSend:
			res.Checked.AckedWrites++
			if final == nil {
				add(VLostWrite, op.Session, "%s of %s was acknowledged; the session is gone", op.Kind, op.Key)
				continue
			}
			if op.Key != "" && !sessionKeys(final)[op.Key] {
				add(VLostWrite, op.Session, "message %s was acknowledged (%s); it is neither in the history nor in the inbox", op.Key, op.Kind)
			}
		case OpResolve:
			res.Checked.AckedWrites++
			if final == nil {
				add(VLostWrite, op.Session, "resolution of %s was acknowledged; the session is gone", op.Step)
				continue
			}
			st := stepByID(final, op.Step)
			switch {
			case st == nil:
				add(VLostWrite, op.Session, "resolution of %s was acknowledged; the Step is gone", op.Step)
			case st.Status != dexv1.StepStatus_STEP_STATUS_DONE:
				add(VLostWrite, op.Session, "resolution of %s was acknowledged; the Step is %s", op.Step, st.Status)
			}
		}
	}
	for id, r := range sessions {
		for k := range sessionKeys(r) {
			if !sent[id+"\x00"+k] {
				add(VPhantomWrite, id, "message %s is in the session; no client sent it", k)
			}
		}
	}
}

// The demo tools' policies (cmd/dexworker/README.md).
var idempotentWrites = map[string]bool{"save_note": true, "deploy": true, "build": true}

func checkLedger(in CheckInput, res *CheckResult, add func(kind, session, format string, args ...any)) {
	sessions := judgedSessions(in)
	steps := map[string]*dexv1.Step{}
	for _, r := range sessions {
		for _, st := range r.GetSteps() {
			steps[st.Id] = st
		}
	}
	type callKey struct{ session, call string }
	execs := map[callKey][]harness.LedgerEntry{}
	perAttempt := map[string]int{}
	modelRuns := map[string]int{}
	for _, e := range in.Ledger {
		st := steps[e.Step]
		if sessions[e.Session] == nil && in.Life != nil {
			continue // deleted unseen: checkLifecycle judges its deletion
		}
		if sessions[e.Session] == nil {
			add(VUnclaimedExec, e.Session, "%s ran (step %s, attempt %d, %s) in a session that is not in the final state", e.Tool, e.Step, e.Attempt, e.Worker)
			continue
		}
		if st == nil {
			add(VUnclaimedExec, e.Session, "%s ran for step %s (attempt %d, %s): no such Step was committed", e.Tool, e.Step, e.Attempt, e.Worker)
			continue
		}
		var at *dexv1.Attempt
		for _, a := range st.Attempts {
			if a.N == e.Attempt {
				at = a
			}
		}
		switch {
		case at == nil:
			add(VUnclaimedExec, e.Session, "%s ran as attempt %d of step %s: the Step has no such attempt", e.Tool, e.Attempt, e.Step)
		case at.WorkerId != e.Worker:
			add(VUnclaimedExec, e.Session, "%s ran as attempt %d of step %s by %s: the attempt was handed to %q", e.Tool, e.Attempt, e.Step, e.Worker, at.WorkerId)
		case at.ClaimedAtMs == 0:
			add(VUnclaimedExec, e.Session, "%s ran as attempt %d of step %s: the attempt was never claimed", e.Tool, e.Attempt, e.Step)
		case e.Epoch != 0 && e.Epoch != at.Epoch:
			add(VUnclaimedExec, e.Session, "%s ran as attempt %d of step %s handed under epoch %d: the attempt was committed under epoch %d", e.Tool, e.Attempt, e.Step, e.Epoch, at.Epoch)
		}
		one := fmt.Sprintf("%s/%d/%s/%s", e.Step, e.Attempt, e.Kind, e.CallID)
		perAttempt[one]++
		if perAttempt[one] == 2 {
			add(VDoubleExec, e.Session, "attempt %d of step %s ran %s twice", e.Attempt, e.Step, e.Tool)
		}
		switch e.Kind {
		case "model":
			modelRuns[e.Step]++
			limit := min(st.MaxAttempts, 3)
			if st.MaxAttempts == 0 {
				limit = 3
			}
			if modelRuns[e.Step] == int(limit)+1 {
				add(VModelAttempts, e.Session, "RunModel step %s ran %d times; it has %d attempts (at most 3)", e.Step, modelRuns[e.Step], limit)
			}
		case "tool", "poll":
			execs[callKey{e.Session, e.CallID}] = append(execs[callKey{e.Session, e.CallID}], e)
		}
	}
	res.Checked.Calls = len(execs)
	for k, es := range execs {
		var tools, keys, tasks = map[string]int{}, map[string]bool{}, map[string]bool{}
		maxAttempts := uint32(0)
		single := false
		for _, e := range es {
			if e.Kind == "poll" {
				tasks[e.TaskID] = true
				continue
			}
			tools[e.Tool]++
			keys[e.IdempotencyKey] = true
			if st := steps[e.Step]; st != nil {
				maxAttempts = max(maxAttempts, st.MaxAttempts)
				single = single || st.Kind == dexv1.StepKind_STEP_KIND_CALL_SINGLE_ATTEMPT_TOOL
			}
		}
		for tool, n := range tools {
			switch {
			case single || tool == "send_email":
				if n > 1 {
					add(VSingleAttempt, k.session, "single-attempt %s (call %s) ran %d times", tool, k.call, n)
				}
			case idempotentWrites[tool]:
				if len(keys) > 1 {
					add(VIdempotentKey, k.session, "idempotent write %s (call %s) ran under %d keys: %v", tool, k.call, len(keys), sortedKeys(keys))
				}
			default:
				if maxAttempts == 0 {
					maxAttempts = 3
				}
				if n > int(maxAttempts) {
					add(VReadAttempts, k.session, "read %s (call %s) ran %d times; its Step has %d attempts", tool, k.call, n, maxAttempts)
				}
			}
		}
		if len(tasks) > 1 {
			add(VPollTask, k.session, "call %s polled %d tasks: %v", k.call, len(tasks), sortedKeys(tasks))
		}
	}
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// checkToldOnce: every call (a tool, a timer, an approval, a question) has
// at most one result in its session's history.
func checkToldOnce(in CheckInput, add func(kind, session, format string, args ...any)) {
	for id, r := range judgedSessions(in) {
		seen := map[string]int{}
		for _, h := range r.GetSession().GetHistory() {
			if h.Kind == dexv1.HistoryKind_HISTORY_KIND_TOOL_RESULT && h.CallId != "" {
				seen[h.CallId]++
				if seen[h.CallId] == 2 {
					add(VToldTwice, id, "call %s (%s) has two results in the history", h.CallId, h.Tool)
				}
			}
		}
	}
}

func checkDigests(in CheckInput, res *CheckResult, add func(kind, session, format string, args ...any)) {
	if in.DigestErr != "" {
		add(VCheckIncomplete, "", "node states not compared: %s", in.DigestErr)
		return
	}
	if in.Partitions > 1 {
		for k, set := range in.PartitionDigests {
			compareDigests(set.Digests, set.Index, res.adderIn(k))
		}
		if len(in.PartitionDigests) > 0 {
			res.Checked.Nodes = len(in.PartitionDigests[0].Digests)
		}
		return
	}
	res.Checked.Nodes = len(in.Digests)
	compareDigests(in.Digests, in.DigestIndex, add)
}

// compareDigests: every node's state (node id → digest) at index is the
// first node's.
func compareDigests(digests map[string]string, index uint64, add func(kind, session, format string, args ...any)) {
	var first, firstNode string
	for _, n := range sortedKeys(keysOf(digests)) {
		d := digests[n]
		if first == "" {
			first, firstNode = d, n
			continue
		}
		if d != first {
			add(VDiverged, "", "at index %d node %s's state is %.12s…, node %s's %.12s…", index, n, d, firstNode, first)
		}
	}
}

func stepByID(r *dexv1.GetSessionResponse, id string) *dexv1.Step {
	for _, st := range r.Steps {
		if st.Id == id {
			return st
		}
	}
	return nil
}
