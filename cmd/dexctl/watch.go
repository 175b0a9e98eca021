package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/status"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// errSettled stops a --until-idle watch: the session settled.
var errSettled = errors.New("settled")

func newSessionWatchCmd(g *globals) *cobra.Command {
	var after uint64
	var asJSON, untilIdle, live bool
	cmd := &cobra.Command{
		Use:   "watch ID",
		Short: "Stream a session's events; resumes on the new leader after a takeover",
		Long: `Stream a session's events; resumes on the new leader after a takeover.

With --until-idle the watch ends, exit 0, once it has shown every event and
the session is idle, errored or paused, with a summary line.

The running model calls' output is shown as it is written, for Workers that
stream it (--live, on by default; docs/design/streaming.md): an attempt's
text on a line of its own, marked when the committed result replaces it or
the attempt was abandoned.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			addrs, err := g.list()
			if err != nil {
				return err
			}
			// The library's watch follows the lease holder and resumes after
			// the last event it delivered.
			conn, err := client.Dial("dex:///"+strings.Join(addrs, ","), append(g.tls.dialOptions(), g.tokenOption())...)
			if err != nil {
				return err
			}
			defer conn.Close()
			w := cmd.OutOrStdout()
			// settled asks whether the session is at rest and the watch has
			// shown its latest event (seen); it prints the summary if so.
			settled := func(ctx context.Context, seen uint64) (bool, error) {
				r, err := sessions(conn).GetSession(ctx, &dexv1.GetSessionRequest{SessionId: args[0], HistoryLimit: 1, StepsLimit: 1})
				if err != nil {
					return false, err
				}
				if r.LastEventSeq > seen || !atRest(r.Session.Status) {
					return false, nil
				}
				return true, printSettled(w, r.Session, asJSON)
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			if untilIdle {
				if done, err := settled(ctx, after); err != nil || done {
					return statusErr(err)
				}
			}
			opts := []client.WatchOption{client.OnEventsNotKept(func(gap client.EventsNotKeptError) error {
				return printEventsNotKept(w, gap, asJSON)
			})}
			if live {
				opts = append(opts, client.WithLiveOutput())
			}
			p := &livePrinter{w: w, asJSON: asJSON}
			err = client.New(conn).WatchSession(ctx, args[0], after, func(e *dexv1.Event) error {
				if err := p.print(e); err != nil {
					return err
				}
				if e.Output != nil {
					return nil
				}
				if untilIdle {
					if done, err := settled(ctx, e.Seq); err != nil || done {
						if err == nil {
							err = errSettled
						}
						return err
					}
				}
				return nil
			}, opts...)
			if errors.Is(err, errSettled) || ctx.Err() != nil {
				return nil // settled, or interrupted
			}
			return statusErr(err)
		},
	}
	cmd.Flags().Uint64Var(&after, "after", 0, "start after this event sequence number")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per event")
	cmd.Flags().BoolVar(&untilIdle, "until-idle", false, "end once the session is idle, errored or paused (exit 0) with a summary line")
	cmd.Flags().BoolVar(&live, "live", true, "show the running model calls' output as it is written (--live=false: only the events)")
	return cmd
}

func statusErr(err error) error {
	if err == nil {
		return nil
	}
	return errors.New(status.Convert(err).Message())
}

// atRest: no turn runs and none waits; only new input (or a resume) moves it.
func atRest(s dexv1.SessionStatus) bool {
	switch s {
	case dexv1.SessionStatus_SESSION_STATUS_IDLE, dexv1.SessionStatus_SESSION_STATUS_ERRORED, dexv1.SessionStatus_SESSION_STATUS_PAUSED,
		dexv1.SessionStatus_SESSION_STATUS_CLOSED:
		return true
	}
	return false
}

func printSettled(w io.Writer, s *dexv1.Session, asJSON bool) error {
	name := fsm.StatusName(fsmpb.SessionStatus(s.Status))
	if asJSON {
		return json.NewEncoder(w).Encode(map[string]any{"settled": map[string]any{
			"session_id": s.Id, "status": name, "turns_completed": s.TurnsCompleted, "turns_failed": s.TurnsFailed,
			"last_error": s.LastError, "pause_message": s.PauseMessage,
		}})
	}
	line := fmt.Sprintf("session %s is %s: %s completed, %d failed", safe(s.Id), name, plural(s.TurnsCompleted, "turn", "turns"), s.TurnsFailed)
	switch s.Status {
	case dexv1.SessionStatus_SESSION_STATUS_ERRORED:
		line += "; last error: " + safe(s.LastError)
	case dexv1.SessionStatus_SESSION_STATUS_PAUSED:
		if s.PauseMessage != "" {
			line += "; " + safe(s.PauseMessage)
		}
	}
	_, err := fmt.Fprintln(w, line)
	return err
}

func printEvent(w io.Writer, e *dexv1.Event, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(w).Encode(map[string]any{
			"seq": e.Seq, "type": e.Type, "step_id": e.StepId, "detail": e.Detail, "at_ms": e.AtMs,
			"at": time.UnixMilli(e.AtMs).UTC().Format(time.RFC3339Nano),
		})
	}
	_, err := fmt.Fprintf(w, "%6d %s %-18s %s %s\n", e.Seq, time.UnixMilli(e.AtMs).UTC().Format("2006-01-02T15:04:05.000Z"),
		safe(e.Type), safe(e.StepId), safe(readableDetail(e.Detail)))
	return err
}

// attemptToken matches fsm.AttemptToken: STEP#N@EPOCH.
var attemptToken = regexp.MustCompile(`\S+#(\d+)@\d+`)

// readableDetail writes attempt tokens as the attempt they name: a token
// is for Workers, a person reads "attempt 2".
func readableDetail(d string) string {
	return attemptToken.ReplaceAllString(d, "attempt $1")
}
