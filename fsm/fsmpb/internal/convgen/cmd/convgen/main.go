// Command convgen writes fsmpb's generated conversions (go generate in
// fsm/fsmpb runs it, built with the tag convgen).
package main

import (
	"flag"
	"fmt"
	"os"

	_ "github.com/dexhq/dex/api/dexv1"
	_ "github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/fsm/fsmpb/internal/convgen"
)

func main() {
	out := flag.String("o", "api_gen.go", "the file to write")
	flag.Parse()
	if err := convgen.WriteFile(*out); err != nil {
		fmt.Fprintln(os.Stderr, "convgen:", err)
		os.Exit(1)
	}
}
