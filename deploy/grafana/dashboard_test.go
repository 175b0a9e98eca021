// Package grafana holds the checks of the Grafana dashboard (dex.json).
package grafana

import (
	"encoding/json"
	"os"
	"testing"
)

type dashboard struct {
	Panels []panel `json:"panels"`
}

type panel struct {
	ID         int         `json:"id"`
	Type       string      `json:"type"`
	Title      string      `json:"title"`
	Datasource *datasource `json:"datasource"`
	GridPos    struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []struct {
		Datasource   *datasource `json:"datasource"`
		Expr         string      `json:"expr"`
		LegendFormat string      `json:"legendFormat"`
		RefID        string      `json:"refId"`
	} `json:"targets"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	data, err := os.ReadFile("dex.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("dex.json: %v", err)
	}
	if len(d.Panels) < 10 {
		t.Fatalf("dex.json has %d panels: is it the dashboard?", len(d.Panels))
	}
	return d
}

// Grafana places panels on a grid 24 wide: each fits in it, none covers
// another, and each has an id of its own.
func TestDashboard_PanelsTileTheGrid(t *testing.T) {
	d := readDashboard(t)
	ids := map[int]string{}
	for i, p := range d.Panels {
		if other, dup := ids[p.ID]; dup {
			t.Errorf("panels %q and %q share the id %d", other, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
		g := p.GridPos
		if g.W < 1 || g.H < 1 || g.X < 0 || g.Y < 0 || g.X+g.W > 24 {
			t.Errorf("panel %q: gridPos %+v does not fit a grid 24 wide", p.Title, g)
		}
		for _, q := range d.Panels[:i] {
			o := q.GridPos
			if g.X < o.X+o.W && o.X < g.X+g.W && g.Y < o.Y+o.H && o.Y < g.Y+g.H {
				t.Errorf("panels %q %+v and %q %+v overlap", q.Title, o, p.Title, g)
			}
		}
	}
}

// Every query reads the Prometheus the dashboard's user picked (the
// datasource variable), and a panel's queries are told apart.
func TestDashboard_EveryQueryReadsThePickedPrometheus(t *testing.T) {
	picked := datasource{Type: "prometheus", UID: "${datasource}"}
	queries := 0
	for _, p := range readDashboard(t).Panels {
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || *p.Datasource != picked {
			t.Errorf("panel %q: datasource %v; want %v", p.Title, p.Datasource, picked)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			queries++
			if tg.Datasource == nil || *tg.Datasource != picked {
				t.Errorf("panel %q, query %s: datasource %v; want %v", p.Title, tg.RefID, tg.Datasource, picked)
			}
			if tg.Expr == "" || tg.RefID == "" || refs[tg.RefID] {
				t.Errorf("panel %q: query %q with refId %q: want an expression and a refId of its own", p.Title, tg.Expr, tg.RefID)
			}
			refs[tg.RefID] = true
		}
	}
	if queries == 0 {
		t.Fatal("no query in dex.json")
	}
}
