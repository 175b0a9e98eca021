package chaos

import (
	"context"
	"errors"
	"fmt"
	"github.com/dexhq/dex/chaos/harness"
	"io"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// The crash matrix of docs/crash-matrix.md: every row against every column, each cell a
// real test with real dexd and dexworker processes.

// Column names.
const (
	ColWorkerKill    = "worker-kill"
	ColServerRestart = "server-restart"
	ColTakeover      = "takeover"
	ColLeaderPause   = "leader-pause"
	ColTakeoverDex   = "takeover-dex"
)

// Column is one kind of fault.
type Column struct {
	Name  string
	Title string
	// What the fault does, for the report.
	Fault string
}

// Columns in report order.
var Columns = []Column{
	{ColWorkerKill, "Worker kill", "the Worker gets SIGKILL and a new Worker starts"},
	{ColServerRestart, "Server restart", "every dexd gets SIGKILL at once and restarts on its data dir; the Worker keeps running"},
	{ColTakeover, "Takeover", "the leader gets SIGKILL, a standby takes the lease; the Worker keeps running; the killed node restarts and rejoins"},
	{ColLeaderPause, "Leader pause", "the leader gets SIGSTOP past the election timeout, then SIGCONT; the woken deposed leader dispatches, fires and commits nothing"},
	{ColTakeoverDex, "Takeover (dex:///)", "the Takeover column again with the Workers on the Go library's dex:/// target"},
}

// ColumnByName finds a column.
func ColumnByName(name string) (Column, bool) {
	for _, c := range Columns {
		if c.Name == name {
			return c, true
		}
	}
	return Column{}, false
}

// Row is one row of the docs/crash-matrix.md table.
type Row struct {
	Step     string
	Moment   string
	Expected string
	// NA names the columns a cell of this row cannot apply to, with why.
	NA map[string]string
	// Failpoint: the cell needs the chaos build of dexd (go build -tags
	// chaos) for this failpoint.
	Failpoint string
	// Adapter: the row is about this framework adapter of the TypeScript
	// Worker (WorkerAdapters); with any other Worker its cells are n/a.
	Adapter  string
	scenario scenario
}

// Name is "Step | Moment", what --row matches.
func (r *Row) Name() string { return r.Step + " | " + r.Moment }

// Cell is one row against one column.
type Cell struct {
	Row    *Row
	Column Column
}

// Name is "column | Step | Moment".
func (c Cell) Name() string { return c.Column.Name + " | " + c.Row.Name() }

// CellResult is the verdict of one cell.
type CellResult struct {
	Step    string  `json:"step"`
	Moment  string  `json:"moment"`
	Column  string  `json:"column"`
	Result  string  `json:"result"` // pass, fail or n/a
	Reason  string  `json:"reason"`
	Seconds float64 `json:"seconds"`
	// Takeovers: time from the leader's SIGKILL to the new leader's first
	// /readyz 200, for each takeover the cell made.
	Takeovers []time.Duration `json:"-"`
	// Logs: where the logs of a failed cell were kept.
	Logs string `json:"logs,omitempty"`
	// Reproduce: the command that runs a failed certify cell again.
	Reproduce string `json:"reproduce,omitempty"`
}

// Results.
const (
	ResultPass = "pass"
	ResultFail = "fail"
	ResultNA   = "n/a"
)

// MatrixOptions configure a run of the matrix.
type MatrixOptions struct {
	// BinDir holds dexd and dexworker. A dexd built with -tags chaos in
	// BinDir/chaos (or BinDir itself) runs the failpoint cells.
	BinDir string
	// Out receives matrix.md, matrix.json and the logs of failed cells.
	Out string
	// Columns to run (default all); RowPattern, a regexp matched against
	// "Step | Moment" (default all rows).
	Columns    []string
	RowPattern string
	// Progress gets one line per cell as it runs (nil: none).
	Progress io.Writer
	// Parallel cells at once (default 1).
	Parallel int
	// TmpDir for the cells' data dirs (default the system's).
	TmpDir string
	// KeepLogs keeps every cell's logs, not only a failed cell's.
	KeepLogs bool
	// Worker is the demo Worker's language (WorkerLanguages; default go).
	Worker string
	// Adapter: the framework adapter of the TypeScript Worker ("": none).
	Adapter string
	// UserWorker, when set, runs the user's Worker instead of a demo
	// Worker (dexchaos certify); TestCluster, when set, runs the cells on
	// that cluster instead of a fresh one (Worker-kill cells only).
	UserWorker  *UserWorker
	TestCluster *TestCluster
	// Partitions: every cell's cluster runs dexd --partitions N (0 or 1:
	// one raft group). The cell's sessions live in one partition, whose
	// leader the server faults strike; the takeover columns keep sessions
	// of the other partitions running through the kill
	// (scenario_partitions.go).
	Partitions int
}

// SelectCells lists the cells of the options' columns and rows, in report
// order (row by row, column by column).
func SelectCells(columns []string, rowPattern string) ([]Cell, error) {
	return selectCells(Rows, Columns, columns, rowPattern)
}

// selectCells lists the cells of rows in the columns asked for (default
// all of allowed) whose "Step | Moment" matches rowPattern.
func selectCells(rows []Row, allowed []Column, columns []string, rowPattern string) ([]Cell, error) {
	var cols []Column
	if len(columns) == 0 {
		cols = allowed
	}
	for _, name := range columns {
		i := slices.IndexFunc(allowed, func(c Column) bool { return c.Name == name })
		if i < 0 {
			var known []string
			for _, c := range allowed {
				known = append(known, c.Name)
			}
			return nil, fmt.Errorf("unknown column %q (known: %s)", name, strings.Join(known, ", "))
		}
		cols = append(cols, allowed[i])
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
		r := &rows[i]
		if re != nil && !re.MatchString(r.Name()) {
			continue
		}
		for _, c := range cols {
			out = append(out, Cell{Row: r, Column: c})
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no cell matches the columns and rows asked for")
	}
	return out, nil
}

// RunMatrix runs the cells, prints a progress line per cell and returns the
// results in cell order.
func RunMatrix(ctx context.Context, o MatrixOptions, cells []Cell) []CellResult {
	if o.Parallel <= 0 {
		o.Parallel = 1
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	chaosDir, chaosErr := harness.ChaosDexd(o.BinDir)
	results := make([]CellResult, len(cells))
	var (
		mu   sync.Mutex
		done int
		wg   sync.WaitGroup
	)
	sem := make(chan struct{}, o.Parallel)
	for i, c := range cells {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			results[i] = CellResult{Step: c.Row.Step, Moment: c.Row.Moment, Column: c.Column.Name, Result: ResultFail, Reason: "not run: " + ctx.Err().Error()}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			r := runCell(ctx, o, c, chaosDir, chaosErr)
			mu.Lock()
			results[i] = r
			done++
			line := fmt.Sprintf("[%d/%d] %s | %s | %s ... %s (%.1fs)", done, len(cells), c.Column.Name, c.Row.Step, c.Row.Moment, r.Result, r.Seconds)
			if r.Result != ResultPass {
				line += ": " + r.Reason
			}
			if r.Logs != "" {
				line += " [logs: " + r.Logs + "]"
			}
			fmt.Fprintln(o.Progress, line)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return results
}

// cellTimeout bounds one cell, whatever happens in it.
const cellTimeout = 3 * time.Minute

func runCell(ctx context.Context, o MatrixOptions, c Cell, chaosDir string, chaosErr error) CellResult {
	res := CellResult{Step: c.Row.Step, Moment: c.Row.Moment, Column: c.Column.Name}
	if why, ok := c.Row.NA[c.Column.Name]; ok {
		res.Result, res.Reason = ResultNA, why
		return res
	}
	if c.Row.Adapter != "" && o.Adapter != c.Row.Adapter {
		res.Result, res.Reason = ResultNA, fmt.Sprintf("only the TypeScript Worker through the %s adapter runs this segment (--worker typescript --adapter %s)", c.Row.Adapter, c.Row.Adapter)
		return res
	}
	dexdDir := o.BinDir
	if c.Row.Failpoint != "" {
		if chaosErr != nil {
			res.Result, res.Reason = ResultNA, fmt.Sprintf("needs the chaos build (failpoint %s): %v", c.Row.Failpoint, chaosErr)
			return res
		}
		dexdDir = chaosDir
	}
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, cellTimeout)
	defer cancel()
	e, err := newCellEnv(cctx, o, c, dexdDir)
	if err == nil {
		err = e.run()
	}
	res.Seconds = time.Since(start).Seconds()
	if e != nil {
		res.Takeovers = e.takeovers
		e.stop()
		e.writeNotes(err)
		if err != nil || o.KeepLogs {
			res.Logs = e.keepLogs(err)
		}
		e.remove()
	}
	if err != nil {
		res.Result, res.Reason = ResultFail, oneLine(err.Error())
		return res
	}
	res.Result = ResultPass
	return res
}

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " …"
	}
	return s
}

// slug makes a file name of a cell's name.
func slug(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.TrimSuffix(b.String(), "-")
}
