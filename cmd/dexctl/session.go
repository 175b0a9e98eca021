package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/wirerules"
	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

func sessions(conn *grpc.ClientConn) dexv1.SessionServiceClient {
	return dexv1.NewSessionServiceClient(conn)
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newSessionCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "session", Short: "Start, message, show and watch sessions"}
	cmd.AddCommand(newSessionStartCmd(g), newSessionSendCmd(g), newSessionShowCmd(g), newSessionListCmd(g), newSessionWatchCmd(g), newSessionDeleteCmd(g), newSessionEditCmd(g), newSessionCancelCmd(g), newSessionCloseCmd(g), newSessionBudgetCmd(g), newSessionLabelCmd(g), newResumeCmd(g), newSessionForkCmd(g), newSessionExportCmd(g), newSessionImportCmd(g))
	return cmd
}

// messageText is the text of a message given as TEXT, "-" (standard
// input) or --message-file FILE; a message read from a file or standard
// input is sent as is, up to the cluster's limit (1 MiB by default), far
// beyond what a shell passes as an argument.
func messageText(cmd *cobra.Command, text, file string) (string, error) {
	if file != "" && text != "" {
		return "", usagef("give the message as TEXT, - (standard input) or --message-file FILE, not two of them")
	}
	if file == "" && text != "-" {
		return text, nil
	}
	var b []byte
	var err error
	name := file
	if text == "-" || file == "-" {
		name = "standard input"
		b, err = io.ReadAll(cmd.InOrStdin())
	} else {
		b, err = os.ReadFile(file)
	}
	if err != nil {
		return "", fmt.Errorf("read the message: %v", err)
	}
	if !utf8.Valid(b) {
		return "", usagef("the message in %s is not UTF-8 text", name)
	}
	return string(b), nil
}

func newSessionStartCmd(g *globals) *cobra.Command {
	var msg, msgFile, id, parent, agent, budget string
	var labels []string
	var threshold uint64
	var retention time.Duration
	var asJSON bool
	var dispatch dispatchFlags
	cmd := &cobra.Command{
		Use:   "start",
		Short: "Create a session, optionally with a first message",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			msg, err := messageText(cmd, msg, msgFile)
			if err != nil {
				return err
			}
			req := &dexv1.CreateSessionRequest{ParentId: parent, CompactionThreshold: threshold, Message: msg, Agent: agent}
			if req.Labels, err = parseLabels("--label", labels); err != nil {
				return err
			}
			if err := dispatch.apply(cmd, req); err != nil {
				return err
			}
			if budget != "" {
				ch, err := wirerules.ParseBudget(budget)
				if err != nil {
					return usagef("--budget: %v", err)
				}
				req.Budget = wirerules.ApplyBudgetChange(nil, ch)
			}
			if cmd.Flags().Changed("retention") {
				if retention < 0 {
					return usagef("--retention must not be negative (0: kept for ever once closed)")
				}
				req.RetentionMs = proto.Int64(retention.Milliseconds())
			}
			explicitID := id
			if id == "" {
				// Chosen here so a retry after a lost answer is recognised;
				// a child's in its parent's partition, where it lives.
				id = client.NewSessionID()
				if parent != "" {
					if n := g.partitionCount(cmd.Context()); n > 1 {
						id = wirerules.NewSessionIDIn(wirerules.PartitionOf(parent, n), n)
					}
				}
			}
			req.SessionId = id
			tried := false
			err = g.onLeader(cmd.Context(), func(ctx context.Context, conn *grpc.ClientConn, tr grpc.CallOption) error {
				_, err := sessions(conn).CreateSession(ctx, req, tr)
				if status.Code(err) == codes.AlreadyExists && tried && explicitID == "" {
					return nil // an earlier try committed before its answer was lost
				}
				tried = tried || err != nil
				return err
			})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), map[string]string{"id": id})
			}
			fmt.Fprintln(cmd.OutOrStdout(), id)
			return nil
		},
	}
	cmd.Flags().StringVar(&msg, "message", "", "first message (- reads it from standard input)")
	cmd.Flags().StringVar(&msgFile, "message-file", "", "read the first message from this file (- for standard input)")
	cmd.Flags().StringVar(&id, "id", "", "session id (default: a new random one)")
	cmd.Flags().StringVar(&parent, "parent", "", "parent session id (this session reports to it)")
	cmd.Flags().StringVar(&agent, "agent", "", "the agent that runs the session, NAME or NAME@VERSION (default: the parent's, else the default agent)")
	cmd.Flags().StringArrayVar(&labels, "label", nil, "KEY=VALUE: a label of the session (repeatable; docs/labels.md)")
	cmd.Flags().DurationVar(&retention, "retention", 0, "keep the session this long once closed (0: for ever; default: the cluster's retention for its agent)")
	cmd.Flags().StringVar(&budget, "budget", "", "FIELD=N[,FIELD=N…]: the session's budget over its agent's (max_tokens, max_cost_micros, max_turns, max_model_calls_per_turn, max_tool_calls_per_turn, loop_limit)")
	dispatch.register(cmd)
	cmd.Flags().Uint64Var(&threshold, "compaction-threshold", 0, "compact the history once it passes this many characters (0: the cluster's default, an eighth of its --max-payload; at most half of it)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newSessionSendCmd(g *globals) *cobra.Command {
	var key, msgFile string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "send ID [TEXT | -]",
		Short: "Send a message to a session (delivered once per --key)",
		Long: `Send a message to a session (delivered once per --key).

The message is TEXT, or read whole from standard input when TEXT is -, or
from --message-file FILE: a long message (up to the cluster's limit, 1 MiB
by default) does not fit on a command line.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			text := ""
			if len(args) == 2 {
				text = args[1]
			}
			if text == "" && msgFile == "" {
				return usagef("no message: give TEXT, - (standard input) or --message-file FILE")
			}
			text, err := messageText(cmd, text, msgFile)
			if err != nil {
				return err
			}
			if key == "" {
				key = client.NewIdempotencyKey()
			}
			var resp *dexv1.SendMessageResponse
			err = g.onLeader(cmd.Context(), func(ctx context.Context, conn *grpc.ClientConn, tr grpc.CallOption) error {
				r, err := sessions(conn).SendMessage(ctx, &dexv1.SendMessageRequest{SessionId: args[0], Text: text, IdempotencyKey: key}, tr)
				resp = r
				return err
			})
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), map[string]any{"session": args[0], "idempotency_key": key, "duplicate": resp.Duplicate})
			}
			if resp.Duplicate {
				fmt.Fprintln(cmd.OutOrStdout(), "already delivered (same key)")
			} else {
				fmt.Fprintln(cmd.OutOrStdout(), "sent")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&msgFile, "message-file", "", "read the message from this file (- for standard input) instead of TEXT")
	cmd.Flags().StringVar(&key, "key", "", "idempotency key (default: a new random one)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// attemptJSON, stepJSON, historyJSON and sessionJSON are the shapes of
// `session show --json`, with the documented names for kinds and outcomes.
type attemptJSON struct {
	N         uint32 `json:"n"`
	Worker    string `json:"worker"`
	Status    string `json:"status"`
	Progress  string `json:"progress,omitempty"`
	Epoch     uint64 `json:"epoch"`
	StartedAt int64  `json:"started_at_ms"`
	ClaimedAt int64  `json:"claimed_at_ms,omitempty"`
	EndedAt   int64  `json:"ended_at_ms,omitempty"`
	ErrorType string `json:"error_type,omitempty"`
	Error     string `json:"error,omitempty"`
}

type stepJSON struct {
	ID             string        `json:"id"`
	Kind           string        `json:"kind"`
	Status         string        `json:"status"`
	Tool           string        `json:"tool,omitempty"`
	CallID         string        `json:"call_id,omitempty"`
	Outcome        string        `json:"outcome,omitempty"`
	Result         string        `json:"result,omitempty"`
	IdempotencyKey string        `json:"idempotency_key,omitempty"`
	TaskID         string        `json:"task_id,omitempty"`
	Prompt         string        `json:"prompt,omitempty"`
	Arguments      string        `json:"arguments,omitempty"`
	DueAtMs        int64         `json:"due_at_ms,omitempty"`
	Attempts       []attemptJSON `json:"attempts"`
	// WaitingReason: why a queued Step is not handed out (no live Worker
	// serves its agent or tool).
	WaitingReason string `json:"waiting_reason,omitempty"`
}

type toolCallJSON struct {
	CallID    string `json:"call_id"`
	Tool      string `json:"tool"`
	Arguments string `json:"arguments,omitempty"`
}

type historyJSON struct {
	Seq         uint64         `json:"seq"`
	Kind        string         `json:"kind"`
	Text        string         `json:"text,omitempty"`
	CallID      string         `json:"call_id,omitempty"`
	Tool        string         `json:"tool,omitempty"`
	Outcome     string         `json:"outcome,omitempty"`
	ToolCalls   []toolCallJSON `json:"tool_calls,omitempty"`
	FromSession string         `json:"from_session,omitempty"`
}

type sessionJSON struct {
	ID     string `json:"id"`
	Parent string `json:"parent,omitempty"`
	Agent  string `json:"agent,omitempty"`
	Status string `json:"status"`
	// ForkedFrom and ForkedAtSeq: a fork's source and the source's entry
	// it was forked at (docs/forks.md).
	ForkedFrom  string `json:"forked_from,omitempty"`
	ForkedAtSeq uint64 `json:"forked_at_seq,omitempty"`
	// Labels: the session's labels (none: left out).
	Labels map[string]string `json:"labels,omitempty"`
	// Closing: closed while a turn runs; closed when it ends.
	Closing bool `json:"closing,omitempty"`
	// DeleteAtMs: when a closed session's retention lets it go (0: never).
	DeleteAtMs    int64         `json:"delete_at_ms,omitempty"`
	RejectedTurns uint32        `json:"rejected_turns"`
	PauseReason   string        `json:"pause_reason,omitempty"`
	PauseMessage  string        `json:"pause_message,omitempty"`
	LastError     string        `json:"last_error,omitempty"`
	Summaries     uint64        `json:"summaries"`
	Inbox         int           `json:"inbox"`
	History       []historyJSON `json:"history"`
	Steps         []stepJSON    `json:"steps"`
	// Folded: the turns whose Steps the cluster folded, in turn order.
	Folded []foldedJSON `json:"folded_turns,omitempty"`
	// Budget: its limits (0: none); Usage: what it used, TreeUsage: it and
	// its descendants, TurnUsage: the turn in progress.
	Budget    budgetJSON `json:"budget"`
	Usage     usageJSON  `json:"usage"`
	TreeUsage usageJSON  `json:"tree_usage"`
	TurnUsage *usageJSON `json:"turn_usage,omitempty"`
	// Its priority, fairness key and weight, and provider, as fields of
	// their own.
	dispatchJSON
}

type budgetJSON struct {
	MaxTokens            uint64 `json:"max_tokens"`
	MaxCostMicros        uint64 `json:"max_cost_micros"`
	MaxTurns             uint64 `json:"max_turns"`
	MaxModelCallsPerTurn uint32 `json:"max_model_calls_per_turn"`
	MaxToolCallsPerTurn  uint32 `json:"max_tool_calls_per_turn"`
	// LoopLimit is the one in force (the cluster's 3 when the budget sets none).
	LoopLimit uint32 `json:"loop_limit"`
}

type usageJSON struct {
	InputTokens  uint64 `json:"input_tokens"`
	OutputTokens uint64 `json:"output_tokens"`
	CostMicros   uint64 `json:"cost_micros"`
	ModelCalls   uint64 `json:"model_calls"`
	ToolCalls    uint64 `json:"tool_calls"`
}

func toUsageJSON(u *dexv1.UsageTotals) usageJSON {
	return usageJSON{InputTokens: u.GetInputTokens(), OutputTokens: u.GetOutputTokens(), CostMicros: u.GetCostMicros(),
		ModelCalls: u.GetModelCalls(), ToolCalls: u.GetToolCalls()}
}

func toBudgetJSON(b *dexv1.Budget) budgetJSON {
	loop := b.GetLoopLimit()
	if loop == 0 {
		loop = fsm.DefaultLoopLimit
	}
	return budgetJSON{MaxTokens: b.GetMaxTokens(), MaxCostMicros: b.GetMaxCostMicros(), MaxTurns: b.GetMaxTurns(),
		MaxModelCallsPerTurn: b.GetMaxModelCallsPerTurn(), MaxToolCallsPerTurn: b.GetMaxToolCallsPerTurn(), LoopLimit: loop}
}

// foldedJSON is what a folded turn kept of its Steps.
type foldedJSON struct {
	Turn     uint64 `json:"turn"`
	Steps    uint32 `json:"steps"`
	Attempts uint32 `json:"attempts"`
	Failed   uint32 `json:"failed_steps,omitempty"`
	Outcome  string `json:"outcome,omitempty"`
}

// withFolded adds a session's folded turns.
func (s sessionJSON) withFolded(folded []*dexv1.FoldedTurn) sessionJSON {
	for _, f := range folded {
		fj := foldedJSON{Turn: f.Turn, Steps: f.Steps, Attempts: f.Attempts, Failed: f.FailedSteps}
		if f.LastOutcome != dexv1.Outcome_OUTCOME_UNSPECIFIED {
			fj.Outcome = fsm.OutcomeName(fsmpb.Outcome(f.LastOutcome))
		}
		s.Folded = append(s.Folded, fj)
	}
	return s
}

func lowerName(s, prefix string) string { return strings.ToLower(strings.TrimPrefix(s, prefix)) }

func toSessionJSON(s *dexv1.Session, steps []*dexv1.Step) sessionJSON {
	out := sessionJSON{
		ID: s.Id, Parent: s.ParentId, Agent: s.Agent, Labels: labelsMap(s.Labels), Status: fsm.StatusName(fsmpb.SessionStatus(s.Status)), RejectedTurns: s.RejectedTurns,
		PauseMessage: s.PauseMessage, LastError: s.LastError, Summaries: s.Summaries, Inbox: len(s.Inbox),
		History: []historyJSON{}, Steps: []stepJSON{}, DeleteAtMs: s.DeleteAtMs, ForkedFrom: s.ForkedFrom, ForkedAtSeq: s.ForkedAtSeq,
		Closing:      s.CloseRequestedAtMs != 0 && s.Status != dexv1.SessionStatus_SESSION_STATUS_CLOSED,
		Budget:       toBudgetJSON(s.Budget),
		Usage:        toUsageJSON(s.Usage),
		TreeUsage:    toUsageJSON(s.TreeUsage),
		dispatchJSON: toDispatchJSON(s),
	}
	if s.Turn != nil {
		u := toUsageJSON(s.Turn.Usage)
		out.TurnUsage = &u
	}
	if s.PauseReason != dexv1.PauseReason_PAUSE_REASON_UNSPECIFIED {
		out.PauseReason = lowerName(s.PauseReason.String(), "PAUSE_REASON_")
	}
	for _, e := range s.History {
		h := historyJSON{Seq: e.Seq, Kind: lowerName(e.Kind.String(), "HISTORY_KIND_"), Text: e.Text, CallID: e.CallId,
			Tool: e.Tool, Outcome: fsm.OutcomeName(fsmpb.Outcome(e.Outcome)), FromSession: e.FromSession}
		for _, c := range e.ToolCalls {
			h.ToolCalls = append(h.ToolCalls, toolCallJSON{CallID: c.CallId, Tool: c.Tool, Arguments: c.Arguments})
		}
		out.History = append(out.History, h)
	}
	for _, st := range steps {
		sj := stepJSON{ID: st.Id, Kind: fsm.KindName(fsmpb.StepKind(st.Kind)), Status: lowerName(st.Status.String(), "STEP_STATUS_"), Tool: st.Tool,
			CallID: st.CallId, IdempotencyKey: st.IdempotencyKey, TaskID: st.TaskId, Prompt: st.Prompt, Arguments: st.Arguments, DueAtMs: st.DueAtMs,
			Attempts: []attemptJSON{}, WaitingReason: st.WaitingReason}
		if st.Status == dexv1.StepStatus_STEP_STATUS_DONE {
			sj.Outcome, sj.Result = fsm.OutcomeName(fsmpb.Outcome(st.Outcome)), st.Result
		}
		for _, a := range st.Attempts {
			aj := attemptJSON{N: a.N, Worker: a.WorkerId, Status: lowerName(a.Status.String(), "ATTEMPT_STATUS_"), Epoch: a.Epoch,
				StartedAt: a.StartedAtMs, ClaimedAt: a.ClaimedAtMs, EndedAt: a.EndedAtMs, Error: a.Error}
			if a.Progress != dexv1.AttemptProgress_ATTEMPT_PROGRESS_UNSPECIFIED {
				aj.Progress = strings.TrimPrefix(a.Progress.String(), "ATTEMPT_PROGRESS_")
			}
			if a.ErrorType != dexv1.ErrorType_ERROR_TYPE_UNSPECIFIED {
				aj.ErrorType = fsm.ErrorTypeName(fsmpb.ErrorType(a.ErrorType))
			}
			sj.Attempts = append(sj.Attempts, aj)
		}
		out.Steps = append(out.Steps, sj)
	}
	return out
}

func newSessionShowCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show a session: status, history and Steps with their attempts",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var resp *dexv1.GetSessionResponse
			err := g.onLeader(cmd.Context(), func(ctx context.Context, conn *grpc.ClientConn, tr grpc.CallOption) error {
				r, err := client.GetWholeSession(ctx, func(ctx context.Context, req *dexv1.GetSessionRequest) (*dexv1.GetSessionResponse, error) {
					return sessions(conn).GetSession(ctx, req, tr)
				}, args[0])
				resp = r
				return err
			})
			if err != nil {
				return err
			}
			sj := toSessionJSON(resp.Session, resp.Steps).withFolded(resp.FoldedTurns)
			if asJSON {
				return printJSON(cmd.OutOrStdout(), sj)
			}
			printSession(cmd.OutOrStdout(), sj, g.partitionCount(cmd.Context()))
			printWaits(cmd.OutOrStdout(), sj, g.commandPrefix(cmd))
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// printSession prints a session; in a cluster of more than one partition,
// with the partition it lives in.
func printSession(w io.Writer, s sessionJSON, partitions int) {
	fmt.Fprintf(w, "session %s  %s", safe(s.ID), s.Status)
	if s.Agent != "" {
		fmt.Fprintf(w, "  agent %s", safe(s.Agent))
	}
	switch {
	case s.Closing:
		fmt.Fprint(w, "  closing: closed when its turn ends")
	case s.Status == "closed" && s.DeleteAtMs != 0:
		fmt.Fprintf(w, "  kept until %s", time.UnixMilli(s.DeleteAtMs).UTC().Format(time.RFC3339))
	case s.Status == "closed":
		fmt.Fprint(w, "  kept for ever")
	}
	if s.PauseMessage != "" {
		fmt.Fprintf(w, "  (%s)", safe(s.PauseMessage))
	} else if s.LastError != "" {
		fmt.Fprintf(w, "  (last error: %s)", safe(s.LastError))
	}
	fmt.Fprintln(w)
	if partitions > 1 {
		fmt.Fprintf(w, "partition: %d\n", wirerules.PartitionOf(s.ID, partitions))
	}
	if len(s.Labels) > 0 {
		fmt.Fprintf(w, "labels: %s\n", labelsLine(s.Labels))
	}
	if s.ForkedFrom != "" {
		fmt.Fprintf(w, "forked from: %s at entry %d\n", safe(s.ForkedFrom), s.ForkedAtSeq)
	}
	printDispatch(w, s.dispatchJSON)
	printUsage(w, s)
	fmt.Fprintln(w, "\nhistory:")
	for _, h := range s.History {
		text := h.Text
		for _, c := range h.ToolCalls {
			text += fmt.Sprintf(" [calls %s %s]", c.Tool, c.CallID)
		}
		if h.Outcome != "" {
			text = fmt.Sprintf("%s %s: %s", h.Tool, h.Outcome, text)
		}
		fmt.Fprintf(w, "  %3d %-11s %s\n", h.Seq, h.Kind, safe(text))
	}
	if n := len(s.Folded); n > 0 {
		steps := uint64(0)
		for _, f := range s.Folded {
			steps += uint64(f.Steps)
		}
		fmt.Fprintf(w, "\nfolded: the Steps of turns %d-%d (%d Steps in %d turns; --json lists them)\n", s.Folded[0].Turn, s.Folded[n-1].Turn, steps, n)
	}
	fmt.Fprintln(w, "\nsteps:")
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "  ID\tKIND\tTOOL\tSTATUS\tOUTCOME\tATTEMPTS")
	for _, st := range s.Steps {
		var att []string
		for _, a := range st.Attempts {
			att = append(att, fmt.Sprintf("%d:%s@%s", a.N, a.Status, a.Worker))
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", safe(st.ID), st.Kind, safe(st.Tool), st.Status, st.Outcome, safe(strings.Join(att, " ")))
	}
	tw.Flush()
	for _, st := range s.Steps {
		if st.WaitingReason != "" {
			fmt.Fprintf(w, "  %s waits: %s\n", safe(st.ID), safe(st.WaitingReason))
		}
	}
}
