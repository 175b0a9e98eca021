// Command dexctl is Dex's operator and client CLI.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintf(os.Stderr, "dexctl: %v\n", err)
		os.Exit(1)
	}
}
