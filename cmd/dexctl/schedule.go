package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// dexctl schedule: sessions started on a schedule (docs/schedules.md).

func schedules(conn *grpc.ClientConn) dexv1.ScheduleServiceClient {
	return dexv1.NewScheduleServiceClient(conn)
}

func newScheduleCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schedule",
		Short: "Start sessions on a schedule: a cron expression in a time zone, or an interval",
		Long: `A schedule starts a session from its template (agent, message, labels) at
each slot of a cron expression in a time zone, or of an interval. The
leader starts each slot's session exactly once, across takeovers. Each
session gets the labels dex.schedule=ID and dex.slot=UNIX_MS, so
"dexctl session list --label dex.schedule=ID" lists a schedule's sessions
(docs/schedules.md).`,
	}
	cmd.AddCommand(newScheduleCreateCmd(g), newScheduleListCmd(g), newScheduleShowCmd(g),
		newScheduleActionCmd(g, "pause", "Pause a schedule: no slot starts until it is resumed"),
		newScheduleActionCmd(g, "resume", "Resume a schedule at its first slot after now (slots passed while paused are not caught up)"),
		newScheduleActionCmd(g, "delete", "Delete a schedule (the sessions it started stay)"),
		newScheduleTriggerCmd(g))
	return cmd
}

var overlapNames = map[string]dexv1.ScheduleOverlap{
	"skip": dexv1.ScheduleOverlap_SCHEDULE_OVERLAP_SKIP, "queue-one": dexv1.ScheduleOverlap_SCHEDULE_OVERLAP_QUEUE_ONE,
	"allow": dexv1.ScheduleOverlap_SCHEDULE_OVERLAP_ALLOW,
}

var catchUpNames = map[string]dexv1.ScheduleCatchUp{
	"skip": dexv1.ScheduleCatchUp_SCHEDULE_CATCH_UP_SKIP, "latest": dexv1.ScheduleCatchUp_SCHEDULE_CATCH_UP_LATEST,
	"all": dexv1.ScheduleCatchUp_SCHEDULE_CATCH_UP_ALL,
}

func newScheduleCreateCmd(g *globals) *cobra.Command {
	var cronExpr, zone, agent, msg, msgFile, overlap, catchUp string
	var every time.Duration
	var labels []string
	var paused, asJSON bool
	cmd := &cobra.Command{
		Use:   "create ID (--cron EXPR [--tz ZONE] | --every DURATION) [--message TEXT] [--label KEY=VALUE…]",
		Short: "Create a schedule",
		Long: `Create schedule ID. Give a 5-field cron expression (or @hourly, @daily…)
with --cron and its IANA time zone with --tz (default UTC), or an interval
with --every (at least 1s; the slots are the creation time plus whole
intervals).

--overlap says what a slot does while the previous slot's session is still
running or waiting: skip (default), queue-one (start it when that session
ends; one waits at most) or allow. --catch-up says what becomes of slots
missed while the cluster was down (more than a minute late): skip
(default), latest (run the latest of them) or all (run them, the latest
100 at most).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (cronExpr == "") == (every == 0) {
				return usagef("give --cron EXPR or --every DURATION, one of them")
			}
			msg, err := messageText(cmd, msg, msgFile)
			if err != nil {
				return err
			}
			req := &dexv1.CreateScheduleRequest{ScheduleId: args[0], Cron: cronExpr, TimeZone: zone, IntervalMs: every.Milliseconds(),
				Agent: agent, Message: msg, Paused: paused}
			if every != 0 && every.Milliseconds() <= 0 {
				return usagef("--every %s: give a positive interval", every)
			}
			if req.Labels, err = parseLabels("--label", labels); err != nil {
				return err
			}
			var ok bool
			if req.Overlap, ok = overlapNames[overlap]; !ok {
				return usagef("--overlap %q: use skip, queue-one or allow", overlap)
			}
			if req.CatchUp, ok = catchUpNames[catchUp]; !ok {
				return usagef("--catch-up %q: use skip, latest or all", catchUp)
			}
			tried := false
			var got *dexv1.Schedule
			err = g.onLeader(cmd.Context(), func(ctx context.Context, conn *grpc.ClientConn, tr grpc.CallOption) error {
				r, err := schedules(conn).CreateSchedule(ctx, req, tr)
				if status.Code(err) == codes.AlreadyExists && tried {
					// An earlier try committed before its answer was lost.
					s, gerr := schedules(conn).GetSchedule(ctx, &dexv1.GetScheduleRequest{ScheduleId: req.ScheduleId}, tr)
					if gerr == nil && s.Schedule.Cron == req.Cron && s.Schedule.IntervalMs == req.IntervalMs {
						got = s.Schedule
						return nil
					}
				}
				tried = tried || err != nil
				got = r.GetSchedule()
				return err
			})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), toScheduleJSON(got))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s  created, next slot %s\n", safe(got.Id), slotText(got.NextSlotMs))
			return nil
		},
	}
	cmd.Flags().StringVar(&cronExpr, "cron", "", `a 5-field cron expression ("0 9 * * 1-5") or a descriptor (@hourly)`)
	cmd.Flags().StringVar(&zone, "tz", "", "the cron expression's IANA time zone (default UTC)")
	cmd.Flags().DurationVar(&every, "every", 0, "an interval instead of a cron expression (at least 1s)")
	cmd.Flags().StringVar(&agent, "agent", "", "the sessions' agent, NAME or NAME@VERSION (default: the default agent)")
	cmd.Flags().StringVar(&msg, "message", "", "each session's first message (- reads it from standard input)")
	cmd.Flags().StringVar(&msgFile, "message-file", "", "read the first message from this file (- for standard input)")
	cmd.Flags().StringArrayVar(&labels, "label", nil, "KEY=VALUE: a label of each session (repeatable; docs/labels.md)")
	cmd.Flags().StringVar(&overlap, "overlap", "skip", "skip, queue-one or allow: a slot while the previous slot's session runs")
	cmd.Flags().StringVar(&catchUp, "catch-up", "skip", "skip, latest or all: slots missed while the cluster was down")
	cmd.Flags().BoolVar(&paused, "paused", false, "create it paused")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newScheduleListCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the schedules",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var list []*dexv1.Schedule
			err := g.onLeader(cmd.Context(), func(ctx context.Context, conn *grpc.ClientConn, tr grpc.CallOption) error {
				r, err := schedules(conn).ListSchedules(ctx, &dexv1.ListSchedulesRequest{}, tr)
				list = r.GetSchedules()
				return err
			})
			if err != nil {
				return err
			}
			if asJSON {
				out := make([]scheduleJSON, 0, len(list))
				for _, s := range list {
					out = append(out, toScheduleJSON(s))
				}
				return printJSON(cmd.OutOrStdout(), out)
			}
			if len(list) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "no schedules")
				return nil
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSPEC\tSTATE\tNEXT SLOT\tSTARTED\tSKIPPED")
			for _, s := range list {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\n", safe(s.Id), safe(specText(s)), stateText(s), slotText(s.NextSlotMs), s.Started, s.SkippedOverlap+s.SkippedMissed)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newScheduleShowCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show a schedule: its spec, template, policies and slots",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var s *dexv1.Schedule
			err := g.onLeader(cmd.Context(), func(ctx context.Context, conn *grpc.ClientConn, tr grpc.CallOption) error {
				r, err := schedules(conn).GetSchedule(ctx, &dexv1.GetScheduleRequest{ScheduleId: args[0]}, tr)
				s = r.GetSchedule()
				return err
			})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), toScheduleJSON(s))
			}
			printSchedule(cmd.OutOrStdout(), s)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// newScheduleActionCmd is pause, resume or delete of one schedule.
func newScheduleActionCmd(g *globals, verb, short string) *cobra.Command {
	return &cobra.Command{
		Use:   verb + " ID",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			tried := false
			var next int64
			err := g.onLeader(cmd.Context(), func(ctx context.Context, conn *grpc.ClientConn, tr grpc.CallOption) error {
				c := schedules(conn)
				var err error
				switch verb {
				case "pause":
					var r *dexv1.PauseScheduleResponse
					r, err = c.PauseSchedule(ctx, &dexv1.PauseScheduleRequest{ScheduleId: id}, tr)
					next = r.GetSchedule().GetNextSlotMs()
				case "resume":
					var r *dexv1.ResumeScheduleResponse
					r, err = c.ResumeSchedule(ctx, &dexv1.ResumeScheduleRequest{ScheduleId: id}, tr)
					next = r.GetSchedule().GetNextSlotMs()
				case "delete":
					_, err = c.DeleteSchedule(ctx, &dexv1.DeleteScheduleRequest{ScheduleId: id}, tr)
					if status.Code(err) == codes.NotFound && tried {
						return nil // an earlier try committed before its answer was lost
					}
				}
				tried = tried || err != nil
				return err
			})
			if err != nil {
				return err
			}
			switch verb {
			case "pause":
				fmt.Fprintf(cmd.OutOrStdout(), "%s  paused\n", safe(id))
			case "resume":
				fmt.Fprintf(cmd.OutOrStdout(), "%s  resumed, next slot %s\n", safe(id), slotText(next))
			default:
				fmt.Fprintf(cmd.OutOrStdout(), "%s  deleted\n", safe(id))
			}
			return nil
		},
	}
}

func newScheduleTriggerCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "trigger ID",
		Short: "Start one session of a schedule now, outside its slots",
		Long: `Start one session of schedule ID now, from its template, paused or not;
its next slot is unchanged. Each call starts a session: a call whose
answer was lost is not repeated.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var id string
			err := g.onLeaderOnce(cmd.Context(), func(ctx context.Context, conn *grpc.ClientConn, tr grpc.CallOption) error {
				r, err := schedules(conn).TriggerSchedule(ctx, &dexv1.TriggerScheduleRequest{ScheduleId: args[0]}, tr)
				id = r.GetSessionId()
				return err
			})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), map[string]any{"schedule": args[0], "session_id": id})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s  started by schedule %s\n", safe(id), safe(args[0]))
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

type scheduleJSON struct {
	ID             string            `json:"id"`
	Cron           string            `json:"cron,omitempty"`
	TimeZone       string            `json:"time_zone,omitempty"`
	IntervalMs     int64             `json:"interval_ms,omitempty"`
	Agent          string            `json:"agent,omitempty"`
	Message        string            `json:"message,omitempty"`
	Labels         map[string]string `json:"labels,omitempty"`
	Overlap        string            `json:"overlap"`
	CatchUp        string            `json:"catch_up"`
	Paused         bool              `json:"paused"`
	NextSlotMs     int64             `json:"next_slot_ms"`
	LastSlotMs     int64             `json:"last_slot_ms,omitempty"`
	LastOutcome    string            `json:"last_outcome,omitempty"`
	LastSessionID  string            `json:"last_session_id,omitempty"`
	QueuedSlotMs   int64             `json:"queued_slot_ms,omitempty"`
	Started        uint64            `json:"started"`
	SkippedOverlap uint64            `json:"skipped_overlap"`
	SkippedMissed  uint64            `json:"skipped_missed"`
	CreatedAtMs    int64             `json:"created_at_ms"`
}

func toScheduleJSON(s *dexv1.Schedule) scheduleJSON {
	out := scheduleJSON{
		ID: s.GetId(), Cron: s.GetCron(), TimeZone: s.GetTimeZone(), IntervalMs: s.GetIntervalMs(), Agent: s.GetAgent(), Message: s.GetMessage(),
		Overlap: policyName(s.GetOverlap().String(), "SCHEDULE_OVERLAP_"), CatchUp: policyName(s.GetCatchUp().String(), "SCHEDULE_CATCH_UP_"),
		Paused: s.GetPaused(), NextSlotMs: s.GetNextSlotMs(), LastSlotMs: s.GetLastSlotMs(), LastSessionID: s.GetLastSessionId(),
		QueuedSlotMs: s.GetQueuedSlotMs(), Started: s.GetStarted(), SkippedOverlap: s.GetSkippedOverlap(), SkippedMissed: s.GetSkippedMissed(),
		CreatedAtMs: s.GetCreatedAtMs(),
	}
	if s.GetLastOutcome() != dexv1.ScheduleSlotOutcome_SCHEDULE_SLOT_OUTCOME_UNSPECIFIED {
		out.LastOutcome = policyName(s.GetLastOutcome().String(), "SCHEDULE_SLOT_OUTCOME_")
	}
	if len(s.GetLabels()) > 0 {
		out.Labels = map[string]string{}
		for _, l := range s.GetLabels() {
			out.Labels[l.Key] = l.Value
		}
	}
	return out
}

// policyName is an enum value as dexctl's flags name it (queue-one).
func policyName(s, prefix string) string {
	return strings.ReplaceAll(lowerName(s, prefix), "_", "-")
}

func specText(s *dexv1.Schedule) string {
	if s.IntervalMs > 0 {
		return "every " + (time.Duration(s.IntervalMs) * time.Millisecond).String()
	}
	zone := s.TimeZone
	if zone == "" {
		zone = "UTC"
	}
	return s.Cron + " (" + zone + ")"
}

func stateText(s *dexv1.Schedule) string {
	if s.Paused {
		return "paused"
	}
	return "running"
}

func slotText(ms int64) string {
	if ms == 0 {
		return "-"
	}
	return time.UnixMilli(ms).UTC().Format(time.RFC3339)
}

func printSchedule(w io.Writer, s *dexv1.Schedule) {
	j := toScheduleJSON(s)
	fmt.Fprintf(w, "schedule  %s\n", safe(s.Id))
	fmt.Fprintf(w, "spec      %s\n", safe(specText(s)))
	fmt.Fprintf(w, "state     %s\n", stateText(s))
	fmt.Fprintf(w, "next      %s\n", slotText(s.NextSlotMs))
	fmt.Fprintf(w, "overlap   %s\ncatch-up  %s\n", j.Overlap, j.CatchUp)
	if s.Agent != "" {
		fmt.Fprintf(w, "agent     %s\n", safe(s.Agent))
	}
	if s.Message != "" {
		fmt.Fprintf(w, "message   %s\n", safe(s.Message))
	}
	for _, l := range s.Labels {
		fmt.Fprintf(w, "label     %s=%s\n", safe(l.Key), safe(l.Value))
	}
	if s.LastSlotMs != 0 {
		fmt.Fprintf(w, "last      %s  %s %s\n", slotText(s.LastSlotMs), j.LastOutcome, safe(s.LastSessionId))
	}
	if s.QueuedSlotMs != 0 {
		fmt.Fprintf(w, "queued    %s\n", slotText(s.QueuedSlotMs))
	}
	fmt.Fprintf(w, "slots     %d started, %d skipped (overlap), %d missed\n", s.Started, s.SkippedOverlap, s.SkippedMissed)
}
