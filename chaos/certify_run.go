package chaos

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// CertifyOptions configure a certification run.
type CertifyOptions struct {
	MatrixOptions
	// Tools to exercise (nil: every tool the Worker registers, with {}).
	Tools []CertifyTool
	// ToolsFile and the command, for the reproduce lines.
	ToolsFile string
}

// DiscoverTools starts the user's Worker once on a fresh cluster and
// lists the tools it registers, each with its registered policy and no
// arguments.
func DiscoverTools(ctx context.Context, o MatrixOptions) ([]CertifyTool, error) {
	c := Cell{Row: &Row{Step: "discover", Moment: "the Worker's tools"}, Column: Columns[0]}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	e, err := newCellEnv(cctx, o, c, o.BinDir)
	if e != nil {
		defer e.remove()
		defer e.stop()
	}
	if err != nil {
		return nil, err
	}
	if err := e.startProvider(answerScript()); err != nil {
		return nil, err
	}
	if _, err := e.startWorker(); err != nil {
		return nil, err
	}
	specs, err := e.registeredTools()
	if err != nil {
		return nil, err
	}
	var tools []CertifyTool
	for _, s := range specs {
		if s.NeedsApproval || s.LongRunning || s.Inline {
			continue
		}
		tools = append(tools, CertifyTool{Name: s.Name, Policy: policyOf(s.Access)})
	}
	if len(tools) == 0 {
		return nil, fmt.Errorf("your Worker registered no tool certify can drive (plain reads, idempotent writes, single-attempt tools)")
	}
	return tools, nil
}

// SelectCertifyCells lists the cells of rows in the columns asked for
// (default CertifyColumns) whose "Step | Moment" matches rowPattern.
func SelectCertifyCells(rows []Row, columns []string, rowPattern string) ([]Cell, error) {
	var allowed []Column
	for _, name := range CertifyColumns {
		c, _ := ColumnByName(name)
		allowed = append(allowed, c)
	}
	return selectCells(rows, allowed, columns, rowPattern)
}

// Reproduce is the command line that runs one cell again.
func Reproduce(c CellResult, toolsFile string, command []string) string {
	args := []string{"dexchaos", "certify"}
	if toolsFile != "" {
		args = append(args, "--tools", shellQuote(toolsFile))
	}
	args = append(args, "--columns", c.Column, "--row", shellQuote("^"+regexp.QuoteMeta(c.Step+" | "+c.Moment)+"$"), "--keep-logs", "--")
	for _, a := range command {
		args = append(args, shellQuote(a))
	}
	return strings.Join(args, " ")
}

func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '-' || r == '_' || r == '=' || r == ':' || r == ',' || (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z'))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
