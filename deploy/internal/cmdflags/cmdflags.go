// Package cmdflags reads the flags a Dex command defines from its source, so
// tests can check that deployment files pass only flags the binaries know.
package cmdflags

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// flagDef matches a definition on the commands' FlagSet, always named fs:
// fs.StringVar(&o.id, "id", …), fs.String("tool-run-timeout", …).
var flagDef = regexp.MustCompile(`\bfs\.[A-Z]\w*\([^"\n]*"([a-z][a-z0-9-]*)"`)

// Names returns the flags defined in the non-test Go files of dir.
func Names(dir string) (map[string]bool, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for _, m := range flagDef.FindAllStringSubmatch(string(src), -1) {
			names[m[1]] = true
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("no flag definitions found in %s", dir)
	}
	return names, nil
}
