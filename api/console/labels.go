package console

import (
	"fmt"
	"strings"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// maxLabels is the API's bound on a session's labels (docs/labels.md).
const maxLabels = 32

// labelMessages are the errors of one use of readLabels: a form's labels
// or the list's label filters. Each format takes the line or the key.
type labelMessages struct{ notKeyValue, twice string }

var (
	formLabels   = labelMessages{notKeyValue: "label %q: write KEY=VALUE, one a line", twice: "label %q is given twice"}
	filterLabels = labelMessages{notKeyValue: "label filter %q: write KEY=VALUE", twice: "label %q is filtered on twice"}
)

// parseLabels reads a form's labels: KEY=VALUE, one a line (a value may
// hold commas and spaces). It refuses what cannot be a list of labels —
// a line without "=", an empty key, a key given twice, too many — so the
// API is not called with it; the API judges the keys' and values' text.
func parseLabels(text string) ([]*dexv1.Label, error) {
	out, err := readLabels(strings.Split(text, "\n"), formLabels)
	if err != nil {
		return nil, err
	}
	if len(out) > maxLabels {
		return nil, fmt.Errorf("%d labels given; a session holds at most %d", len(out), maxLabels)
	}
	return out, nil
}

// readLabels reads KEY=VALUE lines, blank ones skipped, each key once.
func readLabels(lines []string, msg labelMessages) ([]*dexv1.Label, error) {
	var out []*dexv1.Label
	seen := map[string]bool{}
	for _, line := range lines {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf(msg.notKeyValue, line)
		}
		if seen[k] {
			return nil, fmt.Errorf(msg.twice, k)
		}
		seen[k] = true
		out = append(out, &dexv1.Label{Key: k, Value: strings.TrimSpace(v)})
	}
	return out, nil
}
