package client

import (
	"context"
	"testing"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// pagedSession answers GetSession as a server does: pages of at most 3
// history entries and 2 Steps, read on from the request's positions.
func pagedSession(history, steps int) func(context.Context, *dexv1.GetSessionRequest) (*dexv1.GetSessionResponse, error) {
	return func(_ context.Context, req *dexv1.GetSessionRequest) (*dexv1.GetSessionResponse, error) {
		resp := &dexv1.GetSessionResponse{Session: &dexv1.Session{Id: req.SessionId}}
		for seq := req.HistoryAfterSeq + 1; seq <= uint64(history); seq++ {
			if len(resp.Session.History) == 3 {
				resp.NextHistoryAfterSeq = seq - 1
				break
			}
			resp.Session.History = append(resp.Session.History, &dexv1.HistoryEntry{Seq: seq})
		}
		for n := req.StepsAfter + 1; n <= uint64(steps); n++ {
			if len(resp.Steps) == 2 {
				resp.NextStepsAfter = n - 1
				break
			}
			resp.Steps = append(resp.Steps, &dexv1.Step{Number: n})
		}
		return resp, nil
	}
}

func TestGetWholeSession_JoinsEveryPageOnce(t *testing.T) {
	for _, c := range []struct{ history, steps int }{{0, 0}, {1, 9}, {10, 1}, {7, 7}} {
		got, err := GetWholeSession(context.Background(), pagedSession(c.history, c.steps), "s")
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Session.History) != c.history || len(got.Steps) != c.steps {
			t.Fatalf("%d entries and %d Steps in pages: joined %d and %d", c.history, c.steps, len(got.Session.History), len(got.Steps))
		}
		for i, e := range got.Session.History {
			if e.Seq != uint64(i+1) {
				t.Fatalf("entry %d has seq %d: a page was joined twice or skipped", i, e.Seq)
			}
		}
		for i, st := range got.Steps {
			if st.Number != uint64(i+1) {
				t.Fatalf("Step %d has number %d: a page was joined twice or skipped", i, st.Number)
			}
		}
		if got.NextHistoryAfterSeq != 0 || got.NextStepsAfter != 0 {
			t.Fatal("the joined view still points at a next page")
		}
	}
}
