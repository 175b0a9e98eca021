package soak

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// The one thing the partitions of a cluster share: the tool catalog and
// the Worker registrations. A registration is made in partition 0, which
// decides on the catalog, then in each other partition in order
// (docs/design/partitions.md), so every partition's state holds the same
// tools with the same policies, and the same registration of a Worker.
// Two things are made partition by partition and may be under way when a
// backup is taken: a registration, and the deregistration of a dead
// Worker by each partition's leader once the Worker's TTL ran out there.
// So a Worker may be missing from some partitions while it registers or
// after it died, never while it runs at rest.

// catalog is what one partition's state holds of the catalog.
type catalog struct {
	tools   map[string]string // tool name → its policy
	workers map[string]string // Worker id → its registration
}

// catalogOf reads the catalog of a partition's state.
func catalogOf(st *fsm.State) catalog {
	c := catalog{tools: map[string]string{}, workers: map[string]string{}}
	for _, t := range st.Tools() {
		c.tools[t.Name] = fsm.PolicyText(t)
	}
	for _, w := range st.Workers() {
		c.workers[w.Id] = registrationText(w)
	}
	return c
}

// registrationText is what a Worker registered, for comparing: whether it
// runs models, for which agents, with what run timeout, and each tool
// with its policy and agents (the time of the registration is each
// partition's own).
func registrationText(w *fsmpb.WorkerInfo) string {
	tools := make([]string, 0, len(w.Tools))
	for _, t := range w.Tools {
		tools = append(tools, fmt.Sprintf("%s (%s; agents %v)", t.Name, fsm.PolicyText(t), sorted(t.Agents)))
	}
	sort.Strings(tools)
	return fmt.Sprintf("runs model %t, agents %v, model run timeout %d ms, tools: %s",
		w.RunsModel, sorted(w.Agents), w.ModelRunTimeoutMs, strings.Join(tools, ", "))
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// catalogDiffs says how the partitions' catalogs (cats[k] is partition
// k's) differ, "" when they do not: every tool with one policy in every
// partition, every Worker registered alike wherever it is, and in every
// partition unless mayLag(its id).
func catalogDiffs(cats []catalog, mayLag func(worker string) bool) string {
	var diffs []string
	tools := map[string]bool{}
	workers := map[string]bool{}
	for _, c := range cats {
		for t := range c.tools {
			tools[t] = true
		}
		for w := range c.workers {
			workers[w] = true
		}
	}
	for _, t := range sortedKeys(tools) {
		if h := holdersOf(cats, func(c catalog) (string, bool) { p, ok := c.tools[t]; return p, ok }); h.differ() || len(h.missing) > 0 {
			diffs = append(diffs, fmt.Sprintf("tool %s: %s", t, h))
		}
	}
	for _, w := range sortedKeys(workers) {
		h := holdersOf(cats, func(c catalog) (string, bool) { r, ok := c.workers[w]; return r, ok })
		if h.differ() || len(h.missing) > 0 && !mayLag(w) {
			diffs = append(diffs, fmt.Sprintf("Worker %s: %s", w, h))
		}
	}
	if n := len(diffs); n > 5 {
		diffs = append(diffs[:5], fmt.Sprintf("and %d more", n-5))
	}
	return strings.Join(diffs, "; ")
}

// holders is one entry of the catalog across the partitions: each value
// it has and the partitions holding it, and the partitions without it.
type holders struct {
	values  []string
	by      map[string][]int
	missing []int
}

func holdersOf(cats []catalog, of func(catalog) (string, bool)) holders {
	h := holders{by: map[string][]int{}}
	for k, c := range cats {
		v, ok := of(c)
		if !ok {
			h.missing = append(h.missing, k)
			continue
		}
		if h.by[v] == nil {
			h.values = append(h.values, v)
		}
		h.by[v] = append(h.by[v], k)
	}
	return h
}

// differ: the partitions that hold the entry hold it differently.
func (h holders) differ() bool { return len(h.values) > 1 }

func (h holders) String() string {
	var parts []string
	if h.differ() {
		for _, v := range h.values {
			parts = append(parts, fmt.Sprintf("%s %q", partitionList(h.by[v]), v))
		}
	}
	if len(h.missing) > 0 {
		parts = append(parts, "missing from "+partitionList(h.missing))
	}
	return strings.Join(parts, ", ")
}

// partitionList names partitions: "partition 2", "partitions 0 and 1".
func partitionList(ks []int) string {
	if len(ks) == 1 {
		return fmt.Sprintf("partition %d", ks[0])
	}
	names := make([]string, len(ks))
	for i, k := range ks {
		names[i] = fmt.Sprint(k)
	}
	return "partitions " + strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}
