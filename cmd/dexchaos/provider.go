package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/dexhq/dex/chaos/provider"
)

const providerUsage = `usage: dexchaos provider --script FILE [--addr 127.0.0.1:0] [--log FILE]

Serves a scripted model behind the providers' HTTP APIs (docs/provider.md):
OpenAI's /v1/chat/completions and /v1/responses and Anthropic's
/v1/messages, streaming and not. Prints the base URLs to give a Worker,

  OPENAI_BASE_URL=http://HOST:PORT/v1
  ANTHROPIC_BASE_URL=http://HOST:PORT

and serves until interrupted. --log appends one JSON line per model call.
Exits 2 on bad usage or a bad script.

Flags:
`

// runProvider serves until ctx ends (SIGINT or SIGTERM when run from main).
func runProvider(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("provider", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, providerUsage); fs.PrintDefaults() }
	script := fs.String("script", "", "the JSON script file")
	addr := fs.String("addr", "127.0.0.1:0", "the address to listen on")
	logPath := fs.String("log", "", "append one JSON line per model call to this file")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *script == "" || fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	sc, err := provider.LoadScript(*script)
	if err != nil {
		fmt.Fprintln(stderr, "dexchaos provider:", err)
		return 2
	}
	s, err := provider.New(sc)
	if err != nil {
		fmt.Fprintln(stderr, "dexchaos provider:", err)
		return 2
	}
	if *logPath != "" {
		f, err := os.OpenFile(*logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			fmt.Fprintln(stderr, "dexchaos provider:", err)
			return 2
		}
		defer f.Close()
		s.Log = f
	}
	url, err := s.Start(*addr)
	if err != nil {
		fmt.Fprintln(stderr, "dexchaos provider:", err)
		return 2
	}
	defer s.Close()
	fmt.Fprintf(stdout, "OPENAI_BASE_URL=%s/v1\nANTHROPIC_BASE_URL=%s\n", url, url)
	<-ctx.Done()
	return 0
}

func runProviderUntilSignal(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runProvider(ctx, args, stdout, stderr)
}
