// Command certify-worker is a Dex Worker to copy: its model is Anthropic's
// Messages API (anthropic.go) and it serves three tools, one per policy
// (tools.go): lookup_order (read), send_invoice (idempotent write) and
// charge_card (single attempt). certify.sh runs `dexchaos certify` against
// it; README.md says how.
//
// Environment:
//
//	DEX_ADDR            the cluster (default dex:///127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103)
//	DEX_TOKEN           the Worker's ACL token, when the cluster has ACLs
//	DEX_WORKER_ID       the Worker id (default: the library's HOST-PID)
//	DEX_LEDGER          the execution ledger (read by the Dex library itself)
//	ANTHROPIC_BASE_URL  default https://api.anthropic.com
//	ANTHROPIC_API_KEY   the API key
//	ANTHROPIC_MODEL     default claude-sonnet-4-5
//	INVOICE_STORE       the invoice system's file (default: in the temp directory)
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/dexhq/dex/api/client"
)

// defaultAddr is every node of the local cluster `make run` starts.
const defaultAddr = "dex:///127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "certify-worker:", err)
		os.Exit(1)
	}
}

func run() error {
	// SIGTERM or SIGINT ends ctx: Run stops polling, lets the running tasks
	// finish (WorkerOptions.ShutdownGrace), deregisters and returns.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	addr := envOr("DEX_ADDR", defaultAddr)
	// dex:///a,b,c follows the node that holds the dispatch lease through
	// takeovers; host:port is a load balancer that checks /readyz. An empty
	// token sends none.
	conn, err := client.Dial(addr, client.WithToken(client.TokenFrom("")))
	if err != nil {
		return err
	}
	defer conn.Close()

	model := NewAnthropicFromEnv()
	if model.APIKey == "" {
		return errors.New("ANTHROPIC_API_KEY is not set")
	}
	store := &InvoiceStore{Path: envOr("INVOICE_STORE", defaultStorePath())}
	w, err := client.NewWorker(conn, client.WorkerOptions{
		ID:    os.Getenv("DEX_WORKER_ID"),
		Model: model,
		Tools: Tools(store),
	})
	if err != nil {
		// Among others: DEX_LEDGER names a file that cannot be opened.
		return err
	}
	fmt.Fprintf(os.Stderr, "certify-worker %s: pid %d, cluster %s, invoices in %s\n", w.ID(), os.Getpid(), addr, store.Path)
	return w.Run(ctx)
}

// envOr is $name, or def when it is unset or empty.
func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
