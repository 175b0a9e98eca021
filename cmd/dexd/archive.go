package main

import (
	"context"
	"fmt"
	"time"

	"github.com/dexhq/dex/api/archive"
	"github.com/dexhq/dex/api/metrics"
	"github.com/dexhq/dex/fsm"
)

// openArchiveTimeout bounds opening --archive-url at start.
const openArchiveTimeout = 30 * time.Second

// openArchive opens --archive-url: one that cannot be opened (an unknown
// scheme, a relative or unusable directory, a malformed bucket URL) is a
// usage error. A cloud bucket is not reached until the first write.
func openArchive(rawURL string) (*archive.Store, error) {
	ctx, cancel := context.WithTimeout(context.Background(), openArchiveTimeout)
	defer cancel()
	s, err := archive.Open(ctx, rawURL)
	if err != nil {
		return nil, &usageError{fmt.Sprintf("--archive-url: %v", oneLine(err.Error()))}
	}
	return s, nil
}

// leaderArchive is the session collector's archive (gc.Archiver): the
// archived form of a session from the leader's state, written to the store
// and counted.
type leaderArchive struct {
	store *archive.Store
	m     *metrics.Archive
}

func (a leaderArchive) Archive(ctx context.Context, st *fsm.State, id string) error {
	obj, err := archive.FromState(st, id)
	if err == nil {
		err = a.store.Put(ctx, id, obj)
	}
	if err != nil {
		a.m.Failed()
		return err
	}
	a.m.Wrote(len(obj))
	return nil
}
