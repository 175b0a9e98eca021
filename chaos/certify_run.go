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
	if len(columns) == 0 {
		columns = CertifyColumns
	}
	var cols []Column
	for _, name := range columns {
		c, ok := ColumnByName(name)
		if !ok || !containsString(CertifyColumns, name) {
			return nil, fmt.Errorf("unknown column %q (certify runs: %s)", name, strings.Join(CertifyColumns, ", "))
		}
		cols = append(cols, c)
	}
	var re *regexp.Regexp
	if rowPattern != "" {
		var err error
		if re, err = regexp.Compile(rowPattern); err != nil {
			return nil, fmt.Errorf("--row: %w", err)
		}
	}
	var out []Cell
	for i := range rows {
		if re != nil && !re.MatchString(rows[i].Name()) {
			continue
		}
		for _, c := range cols {
			out = append(out, Cell{Row: &rows[i], Column: c})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no cell matches the columns and rows asked for")
	}
	return out, nil
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
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
