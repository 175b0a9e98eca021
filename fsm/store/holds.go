package store

import (
	"iter"

	memdb "github.com/hashicorp/go-memdb"

	"github.com/dexhq/dex/fsm/fsmpb"
)

// Provider holds: one row per provider held after a rate_limit failure with
// a Retry-After, keyed by provider. The table is as small as the number of
// providers: a hold that has passed is dropped when the next one is written.

// TableProviderHolds holds the ProviderHold rows.
const TableProviderHolds = "provider_holds"

var providerHoldIndexes = indexes{
	IndexID: {Unique: true, Indexer: &memdb.StringFieldIndex{Field: "Provider"}},
}

// ProviderHold returns a provider's hold, or nil.
func (t *Txn) ProviderHold(provider string) *fsmpb.ProviderHold {
	return lookup[*fsmpb.ProviderHold](t, TableProviderHolds, IndexID, provider)
}

// ProviderHolds iterates every hold, by provider.
func (t *Txn) ProviderHolds() iter.Seq[*fsmpb.ProviderHold] {
	return scan[*fsmpb.ProviderHold](t, TableProviderHolds, IndexID)
}
