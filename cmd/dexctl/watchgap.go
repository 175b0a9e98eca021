package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/dexhq/dex/api/client"
)

// printEventsNotKept tells the watcher which events the cluster no longer
// kept before the watch resumes from the first kept one.
func printEventsNotKept(w io.Writer, gap client.EventsNotKeptError, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(w).Encode(map[string]any{"events_not_kept": map[string]any{
			"session_id": gap.SessionID, "after_seq": gap.After, "through_seq": gap.ResumeAfter, "first_kept_seq": gap.FirstKept,
		}})
	}
	first := "no event is kept yet; waiting for the next"
	if gap.FirstKept != 0 {
		first = fmt.Sprintf("resuming from the first kept event %d", gap.FirstKept)
	}
	_, err := fmt.Fprintf(w, "events after %d up to %d are no longer kept (event retention); %s\n", gap.After, gap.ResumeAfter, first)
	return err
}
