package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/server"
)

// The --big load: one more client that, beside the usual load, makes
// sessions at every payload limit the API documents (docs/limits.md):
// messages and question answers of the message limit (a quarter of
// --max-payload), and model outputs, tool results, the arguments of many
// tool calls and model error texts near --max-payload, the largest request
// a node takes (an error text is cut where it enters; the request is not).
// Each such session holds megabytes in every node's state, log and
// snapshots, so the client makes bigOps of them per soak, whatever its
// length, evenly spread; its calls go into the same history as the other
// clients' and the checker judges them the same way.

// bigEnvelope is what a request needs beside the payload it carries (ids,
// attempt token, field tags): the big reports and answers leave it free
// under --max-payload.
const bigEnvelope = 16 << 10

// bigCalls: the tool calls of the output whose arguments add up to a
// report's size.
const bigCalls = 100

// bigOps is how many big operations a soak makes.
const bigOps = 10

// The big operations.
const (
	// A session whose first message is at the limit, of the "tools" kind:
	// its model copies the message into three tool calls whose results
	// copy it again.
	bigMessage = "message"
	// A message at the limit, of any kind, sent to a session while its
	// first turn runs.
	bigSend   = "send"
	bigOutput = "output" // a model output near --max-payload
	// A tool call whose arguments are near --max-payload and whose result
	// is too: its history entry and its Step hold both, the largest row
	// the limits allow (about twice --max-payload, docs/limits.md).
	bigResult = "result"
	bigMany   = "calls"  // bigCalls tool calls whose arguments add up near --max-payload
	bigError  = "error"  // model errors (retryable, then not) whose texts are near --max-payload
	bigAnswer = "answer" // an ask_user answer of the message limit
)

var bigKinds = []string{bigMessage, bigSend, bigOutput, bigResult, bigMany, bigError, bigAnswer}

// bigSizes are the sizes the big load aims at.
type bigSizes struct {
	Message int // a message and an answer: the cluster's message limit
	Report  int // a model output, a tool result, an error text
	CallArg int // the filler in the arguments of each of bigCalls calls
}

func bigSizesFor(maxPayload int) bigSizes {
	r := maxPayload - bigEnvelope
	return bigSizes{Message: server.LimitsFor(maxPayload).MaxMessage, Report: r, CallArg: r/bigCalls - 64}
}

func (z bigSizes) String() string {
	return fmt.Sprintf("%d big sessions: messages and answers of %d bytes, model outputs, tool results and model errors of %d bytes, %d tool calls of %d bytes",
		bigOps, z.Message, z.Report, bigCalls, z.CallArg)
}

// bigScript is the soak's script with the turns of the big sessions; the
// demo Worker expands {{fill:N}} and "result_bytes" (cmd/dexworker).
func bigScript(z bigSizes) (string, error) {
	var script map[string]any
	if err := json.Unmarshal([]byte(soakScript), &script); err != nil {
		return "", err
	}
	fill := func(n int) string { return fmt.Sprintf("{{fill:%d}}", n) }
	turn := func(match string, outputs ...map[string]any) map[string]any {
		return map[string]any{"match": match, "prefix": true, "outputs": outputs}
	}
	call := func(tool string, args map[string]any) map[string]any {
		return map[string]any{"tool": tool, "arguments": args}
	}
	var many []map[string]any
	for i := range bigCalls {
		if i%2 == 0 {
			many = append(many, call("lookup", map[string]any{"q": fill(z.CallArg)}))
		} else {
			many = append(many, call("save_note", map[string]any{"note": fill(z.CallArg)}))
		}
	}
	script["turns"] = append(script["turns"].([]any),
		turn("bigout", map[string]any{"text": fill(z.Report)}),
		turn("bigresult",
			map[string]any{"tool_calls": []any{call("lookup", map[string]any{"q": fill(z.Report - 64), "result_bytes": z.Report})}},
			map[string]any{"text": "Read it all."}),
		turn("bigcalls", map[string]any{"tool_calls": many}, map[string]any{"text": "Looked up and saved."}),
		turn("bigerror",
			map[string]any{"error": map[string]any{"type": "server_error", "message": fill(z.Report)}},
			map[string]any{"error": map[string]any{"type": "context_length", "message": fill(z.Report)}}),
	)
	b, err := json.Marshal(script)
	return string(b), err
}

// bigClient makes the big operations.
type bigClient struct {
	*loadClient
	z     bigSizes
	order []string
}

func newBigClient(s *soaker, id int) *bigClient {
	z := bigSizesFor(s.o.MaxPayload)
	c := &loadClient{s: s, id: id, r: rand.New(rand.NewPCG(s.o.Seed, uint64(id+1))), answer: padTo("the long answer ", z.Message)}
	order := slices.Clone(bigKinds)
	c.r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	return &bigClient{loadClient: c, z: z, order: order}
}

// run makes one big operation every Duration/bigOps (at least 10 s apart)
// until ctx ends, the kinds in an order drawn from the seed.
func (b *bigClient) run(ctx context.Context, start time.Time) {
	gap := max(b.s.o.Duration/bigOps, 10*time.Second)
	for i := 0; ; i++ {
		if sleepCtx(ctx, time.Until(start.Add(gap/2+time.Duration(i)*gap))) != nil || ctx.Err() != nil {
			return
		}
		kind := b.order[i%len(b.order)]
		id := b.do(ctx, kind, gap)
		fmt.Fprintf(b.s.o.Progress, "soak: %s big %s: %s\n", time.Since(start).Round(time.Second), kind, id)
	}
}

// next is the text and key of the client's next message: kind, its
// number, then filler up to size bytes (no filler when size is 0).
func (b *bigClient) next(kind string, size int) (text, key string) {
	b.n++
	text = fmt.Sprintf("%s c%d-%d ", kind, b.id, b.n)
	if size > 0 {
		text = padTo(text, size)
	}
	return text, fmt.Sprintf("k%d-%d", b.id, b.n)
}

// do makes one big operation and returns the session it made.
func (b *bigClient) do(ctx context.Context, kind string, gap time.Duration) string {
	switch kind {
	case bigMessage:
		text, key := b.next("tools", b.z.Message)
		return b.createWith(text, key, b.r.IntN(2) == 0)
	case bigSend:
		text, key := b.message()
		id := b.createWith(text, key, false)
		text, key = b.next(soakMessages[b.r.IntN(len(soakMessages))], b.z.Message)
		b.sendWith(id, text, key)
		return id
	case bigAnswer:
		text, key := b.next("ask", 0)
		id := b.createWith(text, key, false)
		b.answerWhenAsked(ctx, id, min(gap, time.Minute))
		return id
	}
	match := map[string]string{bigOutput: "bigout", bigResult: "bigresult", bigMany: "bigcalls", bigError: "bigerror"}[kind]
	text, key := b.next(match, 0)
	return b.createWith(text, key, false)
}

// answerWhenAsked waits up to wait for the session's question and answers
// it (with the client's long answer); one left waiting is answered when
// the soak drains.
func (b *bigClient) answerWhenAsked(ctx context.Context, id string, wait time.Duration) {
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if r, err := b.s.get(ctx, id); err == nil && r != nil {
			for _, st := range r.Steps {
				if st.Kind == dexv1.StepKind_STEP_KIND_AWAIT_QUESTION_ANSWER && st.Status == dexv1.StepStatus_STEP_STATUS_WAITING {
					b.resolve(id, st)
					return
				}
			}
		}
		_ = sleepCtx(ctx, 500*time.Millisecond)
	}
}

// padTo is prefix followed by filler up to n bytes.
func padTo(prefix string, n int) string {
	if n <= len(prefix) {
		return prefix
	}
	const alphabet = "abcdefghijklmnopqrstuvwxyz"
	fill := strings.Repeat(alphabet, (n-len(prefix))/len(alphabet)+1)
	return prefix + fill[:n-len(prefix)]
}
