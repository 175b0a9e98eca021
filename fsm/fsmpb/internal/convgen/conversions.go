package convgen

import "google.golang.org/protobuf/reflect/protoreflect"

// The conversions fsmpb has, each a stored message (dex.fsm.v1) and the
// API's message (dex.v1) it is shown as or proposed from. ToAPI generates
// the stored type's API method, FromAPI the function NameFromAPI. The parts
// a conversion needs (a nested message, a list element) are generated with
// it, in the same direction, and need no entry here; lists asks for the
// helpers that convert a list of them (the hand-written HistoryAPI, InboxAPI
// and ToolSpecsFromAPI call them).
var pairs = []pair{
	{stored: "Session", api: "Session", toAPI: true, fromAPI: true},
	{stored: "Step", api: "Step", toAPI: true, fromAPI: true},
	{stored: "Event", api: "Event", toAPI: true, fromAPI: true},
	{stored: "InboxMessage", api: "Message", toAPI: true, fromAPI: true, lists: true},
	{stored: "HistoryEntry", api: "HistoryEntry", toAPI: true, fromAPI: true, lists: true},
	{stored: "AclToken", api: "AclToken", toAPI: true},
	{stored: "Turn", api: "Turn", toAPI: true, fromAPI: true},
	{stored: "CallState", api: "CallState", toAPI: true, fromAPI: true},
	{stored: "Attempt", api: "Attempt", toAPI: true, fromAPI: true},
	{stored: "WorkerInfo", api: "WorkerInfo", toAPI: true},
	{stored: "ToolCall", api: "ToolCall", toAPI: true, fromAPI: true},
	{stored: "InlineResult", api: "InlineResult", toAPI: true, fromAPI: true},
	{stored: "ToolSpec", api: "ToolSpec", toAPI: true, fromAPI: true, lists: true},
	{stored: "NodeInfo", api: "NodeInfo", toAPI: true, fromAPI: true},
	{stored: "FoldedTurn", api: "FoldedTurn", toAPI: true, fromAPI: true, lists: true},
	{stored: "AttemptRef", api: "AttemptRef", fromAPI: true},
	{stored: "AttemptResult", api: "AttemptResult", fromAPI: true},
	{stored: "BulkJob", api: "BulkJob", toAPI: true, fromAPI: true},
}

// oneSided is every field that one side has and the other lacks, with why.
// A conversion leaves it out: a stored-only field is not shown, an API-only
// field is left for the API to fill. Any other field that one side lacks
// stops the generator, so a field added to one schema alone is a decision
// written here, not a silent loss.
var oneSided = map[protoreflect.FullName]string{
	"dex.v1.Step.waiting_reason":          "the API fills it on reads; the state does not store it",
	"dex.fsm.v1.AclToken.secret_sha256":   "a token's secret hash is never shown",
	"dex.fsm.v1.Session.import":           "an import in progress is never shown; the API has no such session yet",
	"dex.fsm.v1.Session.fold_due_through": "the leader's index of sessions owed a fold reads it; it is not shown",
	"dex.fsm.v1.Turn.call_repeats":        "the loop guard's counts; a loop pause names the call in its message",
	"dex.v1.Event.output":                 "live output is relayed by the leader, never stored",
	"dex.fsm.v1.Turn.trace":               "the leader exports the turn's spans from it; a trace is seen in the tracing backend",
	"dex.fsm.v1.Step.trace":               "the leader exports the Step's spans from it and hands Workers its traceparent",
	"dex.fsm.v1.InboxMessage.trace":       "a waiting message's trace is given to the turn it starts",
}

// The proto packages of the two sides and the Go packages generated from them.
const (
	storedPackage = "dex.fsm.v1"
	apiPackage    = "dex.v1"
	storedGoPath  = "github.com/dexhq/dex/fsm/fsmpb"
	apiGoPath     = "github.com/dexhq/dex/api/dexv1"
	apiGoName     = "dexv1"
)
