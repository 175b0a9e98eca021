//go:build !convgen

package fsmpb

import (
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// The state machine stores its rows, and the log its commands, in its own
// types (dex.fsm.v1); the API and the Worker protocol show them as dex.v1
// types. The conversions between the two are generated (api_gen.go, from
// internal/convgen, whose list says which exist and which fields one side
// alone has). A nil message converts to nil; an empty list stays nil.

//go:generate go run -tags convgen ./internal/convgen/cmd/convgen -o api_gen.go

// optional copies an optional scalar field (nil stays nil).
func optional[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// HistoryAPI converts a page of history entries.
func HistoryAPI(hs []*HistoryEntry) []*dexv1.HistoryEntry { return historyEntryListAPI(hs) }

// InboxAPI converts a page of inbox messages.
func InboxAPI(ms []*InboxMessage) []*dexv1.Message { return inboxMessageListAPI(ms) }

// ToolSpecsFromAPI is a Worker's registered tools as the state stores them.
func ToolSpecsFromAPI(ts []*dexv1.ToolSpec) []*ToolSpec { return toolSpecListFromAPI(ts) }

// FoldedTurnsAPI converts a page of folded turns.
func FoldedTurnsAPI(fs []*FoldedTurn) []*dexv1.FoldedTurn { return foldedTurnListAPI(fs) }
