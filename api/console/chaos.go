package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
)

// matrixCell and matrixFile are the parts of dexchaos's matrix.json shown.
type matrixCell struct {
	Step    string  `json:"step"`
	Moment  string  `json:"moment"`
	Column  string  `json:"column"`
	Result  string  `json:"result"`
	Reason  string  `json:"reason"`
	Seconds float64 `json:"seconds"`
}

type matrixFile struct {
	Cells   []matrixCell `json:"cells"`
	Summary struct {
		Pass        int     `json:"pass"`
		Fail        int     `json:"fail"`
		NA          int     `json:"na"`
		Total       int     `json:"total"`
		WallSeconds float64 `json:"wall_seconds"`
	} `json:"summary"`
}

type matrixRow struct {
	Step, Moment string
	Cells        []*matrixCell // one per column; nil: not run
}

type chaosData struct {
	Path    string
	Columns []string
	Rows    []matrixRow
	Matrix  *matrixFile
	Missing string
}

// chaosPage shows the matrix of --chaos-report DIR: rows and columns in
// the order the report lists them.
func (c *Console) chaosPage(w http.ResponseWriter, r *http.Request) {
	d := &chaosData{}
	if c.cfg.ChaosReport == "" {
		d.Missing = "this node was not given a matrix report: start dexd with --chaos-report DIR, where DIR holds the matrix.json of `dexchaos matrix --out DIR`."
		c.render(w, r, http.StatusOK, "chaos", page{Title: "Chaos", Nav: "chaos", Data: d})
		return
	}
	d.Path = filepath.Join(c.cfg.ChaosReport, "matrix.json")
	m, err := readMatrix(d.Path)
	if err != nil {
		d.Missing = err.Error()
		c.render(w, r, http.StatusOK, "chaos", page{Title: "Chaos", Nav: "chaos", Data: d})
		return
	}
	d.Matrix = m
	colIdx := map[string]int{}
	rowIdx := map[[2]string]int{}
	for i := range m.Cells {
		cell := &m.Cells[i]
		if _, ok := colIdx[cell.Column]; !ok {
			colIdx[cell.Column] = len(d.Columns)
			d.Columns = append(d.Columns, cell.Column)
		}
	}
	for i := range m.Cells {
		cell := &m.Cells[i]
		k := [2]string{cell.Step, cell.Moment}
		ri, ok := rowIdx[k]
		if !ok {
			ri = len(d.Rows)
			rowIdx[k] = ri
			d.Rows = append(d.Rows, matrixRow{Step: cell.Step, Moment: cell.Moment, Cells: make([]*matrixCell, len(d.Columns))})
		}
		d.Rows[ri].Cells[colIdx[cell.Column]] = cell
	}
	c.render(w, r, http.StatusOK, "chaos", page{Title: "Chaos", Nav: "chaos", Data: d})
}

func readMatrix(path string) (*matrixFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("no matrix report to show: %v", err)
	}
	var m matrixFile
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s is not a matrix report: %v", path, err)
	}
	return &m, nil
}
