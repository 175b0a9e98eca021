package main

import (
	"io"
	"os"

	"github.com/dexhq/dex/api/client"
)

// The demo Worker's --hold is the library's file holder (client.FileHolder),
// released by the file <ledger>.release or by SIGUSR1.

func parseMoments(s string) (map[string]bool, error) { return client.ParseMoments(s) }

func newHolder(moments map[string]bool, all bool, ledger string, sig <-chan os.Signal, out io.Writer) *client.FileHolder {
	return client.NewFileHolder(moments, all, ledger, sig, out)
}
