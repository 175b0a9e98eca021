package cmdflags

import (
	"os"
	"regexp"
	"slices"
	"strings"
)

// Insecure matches dexd's --insecure (or -insecure) in any form, and not a
// longer flag such as kubectl's --insecure-skip-tls-verify.
var Insecure = regexp.MustCompile(`(^|[^\w-])--?insecure([^\w-]|$)`)

// NamingInsecure reads the files of paths but tests and skip, and returns
// those that name Insecure and how many files it read.
func NamingInsecure(paths []string, skip ...string) (naming []string, read int, err error) {
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") || slices.Contains(skip, p) {
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, read, err
		}
		read++
		if Insecure.Match(data) {
			naming = append(naming, p)
		}
	}
	return naming, read, nil
}
