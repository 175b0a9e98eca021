package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// Tools are the Worker's tools, one per policy. The policy (Access) is what
// the cluster relies on after a crash: a read runs again, an idempotent
// write runs again with the same idempotency key, a single-attempt tool
// never runs twice (its call records outcome_unknown instead). tools.json
// says the same policies to `dexchaos certify`, which checks them.
func Tools(store *InvoiceStore) []client.Tool {
	return []client.Tool{
		{
			Spec: &dexv1.ToolSpec{
				Name:        "lookup_order",
				Description: `Looks an order up: its customer, amount and status, and the invoices sent for it. Arguments: {"order_id": "A-1001"}.`,
				Access:      dexv1.ToolAccess_TOOL_ACCESS_READ,
			},
			Run: lookupOrder(store),
		},
		{
			Spec: &dexv1.ToolSpec{
				Name:        "send_invoice",
				Description: `Sends the customer an invoice for an order. Arguments: {"order_id": "A-1001", "amount_cents": 1250}.`,
				Access:      dexv1.ToolAccess_TOOL_ACCESS_IDEMPOTENT_WRITE,
			},
			Run: sendInvoice(store),
		},
		{
			Spec: &dexv1.ToolSpec{
				Name:        "charge_card",
				Description: `Charges the card on file for an order. Not repeatable: a second call charges again. Arguments: {"order_id": "A-1001", "amount_cents": 1250}.`,
				Access:      dexv1.ToolAccess_TOOL_ACCESS_SINGLE_ATTEMPT,
			},
			Run: chargeCard(store),
		},
	}
}

// orderArgs are the tools' arguments.
type orderArgs struct {
	OrderID     string `json:"order_id"`
	AmountCents int64  `json:"amount_cents"`
}

// parseArgs reads a call's arguments; bad ones are the model's mistake, so
// they are an error result the model reads, not a failed attempt.
func parseArgs(call client.ToolCall) (orderArgs, *client.ToolResult) {
	var a orderArgs
	if call.Arguments == "" {
		return a, nil
	}
	if err := json.Unmarshal([]byte(call.Arguments), &a); err != nil {
		return a, &client.ToolResult{Content: fmt.Sprintf("%s: bad arguments: %v", call.Tool, err), IsError: true}
	}
	return a, nil
}

// orders is the shop's order book.
var orders = map[string]struct {
	Customer    string `json:"customer"`
	AmountCents int64  `json:"amount_cents"`
	Status      string `json:"status"`
}{
	"A-1001": {"Ada Lovelace", 1250, "delivered"},
	"A-1002": {"Charles Babbage", 4999, "shipped"},
}

// lookupOrder reads only, so the cluster may run it again after any crash.
func lookupOrder(store *InvoiceStore) client.ToolHandler {
	return func(ctx context.Context, call client.ToolCall) (client.ToolResult, error) {
		a, bad := parseArgs(call)
		if bad != nil {
			return *bad, nil
		}
		o, ok := orders[a.OrderID]
		if !ok {
			return client.ToolResult{Content: fmt.Sprintf("no order %q", a.OrderID)}, nil
		}
		invoices, _, err := store.Read()
		if err != nil {
			return client.ToolResult{}, err // the attempt fails; a read is retried
		}
		sent := []string{}
		for _, inv := range invoices {
			if inv.OrderID == a.OrderID {
				sent = append(sent, inv.ID)
			}
		}
		b, _ := json.Marshal(map[string]any{"order_id": a.OrderID, "customer": o.Customer,
			"amount_cents": o.AmountCents, "status": o.Status, "invoices": sent})
		return client.ToolResult{Content: string(b)}, nil
	}
}

// sendInvoice passes the call's idempotency key to the invoice system. The
// cluster hands every attempt of one call the same key, so an attempt run
// again after a crash (its first may have sent the invoice already) sends
// nothing new.
func sendInvoice(store *InvoiceStore) client.ToolHandler {
	return func(ctx context.Context, call client.ToolCall) (client.ToolResult, error) {
		a, bad := parseArgs(call)
		if bad != nil {
			return *bad, nil
		}
		// Say, before making it, that the side effect happens with this key:
		// the ledger line is synced first, so a Worker killed during the
		// request below has its request counted, not lost. Without
		// DEX_LEDGER this does nothing.
		if err := client.SideEffect(ctx, "invoice", call.IdempotencyKey); err != nil {
			return client.ToolResult{}, err
		}
		inv, created, err := store.SendInvoice(call.IdempotencyKey, a.OrderID, a.AmountCents)
		if err != nil {
			return client.ToolResult{}, err // the attempt fails; the cluster retries it with the same key
		}
		fmt.Fprintf(os.Stderr, "certify-worker: send_invoice step %s attempt %d key %s: %s (new: %t)\n",
			call.StepID, call.Attempt, call.IdempotencyKey, inv.ID, created)
		if !created {
			return client.ToolResult{Content: fmt.Sprintf("invoice %s for order %s (%d cents) was sent already", inv.ID, inv.OrderID, inv.AmountCents)}, nil
		}
		return client.ToolResult{Content: fmt.Sprintf("invoice %s sent for order %s (%d cents)", inv.ID, inv.OrderID, inv.AmountCents)}, nil
	}
}

// chargeCard calls a card processor that takes no idempotency key: a second
// request charges the card again. Its policy, single_attempt, makes the
// cluster never start it twice; a call whose attempt may have run records
// outcome_unknown for a person to reconcile.
func chargeCard(store *InvoiceStore) client.ToolHandler {
	return func(ctx context.Context, call client.ToolCall) (client.ToolResult, error) {
		a, bad := parseArgs(call)
		if bad != nil {
			return *bad, nil
		}
		// No key goes to the processor, so the effect names none.
		if err := client.SideEffect(ctx, "charge", ""); err != nil {
			return client.ToolResult{}, err
		}
		c, err := store.Charge(a.OrderID, a.AmountCents)
		if err != nil {
			return client.ToolResult{}, err
		}
		fmt.Fprintf(os.Stderr, "certify-worker: charge_card step %s attempt %d: %s\n", call.StepID, call.Attempt, c.ID)
		return client.ToolResult{Content: fmt.Sprintf("charged %d cents for order %s (%s)", c.AmountCents, c.OrderID, c.ID)}, nil
	}
}
