package fsm

import (
	"fmt"
	"strings"

	"github.com/dexhq/dex/fsm/fsmpb"
	"github.com/dexhq/dex/fsm/store"
)

// The tool catalog: one row per tool name holding its policy (a ToolSpec),
// and one row per (tool, live Worker serving it). Every live Worker serving a
// tool agrees on its policy; the row goes with the last of them.

// toolSpec finds a tool of the catalog by name (nil when no live Worker
// serves it).
func (a *applier) toolSpec(name string) *fsmpb.ToolSpec {
	t := a.tx.Tool(name)
	if t == nil {
		return nil
	}
	return t.CloneVT()
}

// toolServers returns the ids of the live Workers serving a tool, in id order.
func (a *applier) toolServers(name string) []string { return (&State{tx: a.tx}).ToolServers(name) }

// checkCatalog refuses a registration that gives a tool another policy than
// a live Worker (other than the registering one) serves it with.
func (a *applier) checkCatalog(workerID string, tools []*fsmpb.ToolSpec) *Rejection {
	for _, t := range tools {
		cur := a.toolSpec(t.Name)
		if cur == nil || samePolicy(cur, t) {
			continue
		}
		for _, other := range a.toolServers(t.Name) {
			if other != workerID {
				return reject(CodeFailedPrecondition,
					"tool %q is served by live worker %q as %s; worker %q registers it as %s: a tool has one policy (deregister %q first, or register the same policy)",
					t.Name, other, PolicyText(cur), workerID, PolicyText(t), other)
			}
		}
	}
	return nil
}

// putCatalog replaces a Worker's rows in the catalog by its new tools.
func (a *applier) putCatalog(workerID string, tools []*fsmpb.ToolSpec) {
	a.dropCatalog(workerID)
	for _, t := range tools {
		a.insert(store.TableTools, catalogSpec(t)) // the same policy as any other server's, or the only server
		a.insert(store.TableWorkerTools, &fsmpb.WorkerTool{Tool: t.Name, WorkerId: workerID, Agents: t.Agents})
	}
}

// dropCatalog removes a Worker's rows, and every tool it was the last to serve.
func (a *applier) dropCatalog(workerID string) {
	for _, wt := range a.tx.WorkerToolRows(workerID) {
		a.delete(store.TableWorkerTools, wt)
		if len(a.toolServers(wt.Tool)) == 0 {
			a.tx.DeleteTool(wt.Tool)
		}
	}
}

// catalogSpec is a tool's policy row: the registration without the agents
// it is served for, which are the Worker's own (its WorkerTool row).
func catalogSpec(t *fsmpb.ToolSpec) *fsmpb.ToolSpec {
	if len(t.Agents) == 0 {
		return t
	}
	c := t.CloneVT()
	c.Agents = nil
	return c
}

// samePolicy compares what decides how a tool's calls run; the description
// may differ.
func samePolicy(x, y *fsmpb.ToolSpec) bool {
	return x.Access == y.Access && x.NeedsApproval == y.NeedsApproval && x.LongRunning == y.LongRunning &&
		x.Inline == y.Inline && toolAttempts(x) == toolAttempts(y) &&
		(!x.LongRunning || pollEvery(x) == pollEvery(y)) && x.RunTimeoutMs == y.RunTimeoutMs
}

// PolicyText describes a tool's policy for people ("single_attempt",
// "read with 5 attempts, needs approval").
func PolicyText(t *fsmpb.ToolSpec) string {
	var b strings.Builder
	switch t.Access {
	case fsmpb.ToolAccess_TOOL_ACCESS_READ:
		b.WriteString("read")
	case fsmpb.ToolAccess_TOOL_ACCESS_IDEMPOTENT_WRITE:
		b.WriteString("idempotent_write")
	case fsmpb.ToolAccess_TOOL_ACCESS_SINGLE_ATTEMPT:
		b.WriteString("single_attempt")
	default:
		b.WriteString("no access policy")
	}
	if t.Access != fsmpb.ToolAccess_TOOL_ACCESS_SINGLE_ATTEMPT {
		fmt.Fprintf(&b, " with %d attempts", toolAttempts(t))
	}
	if t.NeedsApproval {
		b.WriteString(", needs approval")
	}
	if t.LongRunning {
		fmt.Fprintf(&b, ", long running (polled every %d ms)", pollEvery(t))
	}
	if t.Inline {
		b.WriteString(", inline")
	}
	if t.RunTimeoutMs > 0 {
		fmt.Fprintf(&b, ", run timeout %s", RunTimeoutText(t.RunTimeoutMs))
	}
	return b.String()
}

func (a *applier) deregisterWorker(c *fsmpb.DeregisterWorker) *Result {
	if r := validID("worker id", c.WorkerId); r != nil {
		return rejected(r)
	}
	w := a.tx.Worker(c.WorkerId)
	if w == nil {
		return rejected(reject(CodeNotFound, "worker %q is not registered", c.WorkerId))
	}
	a.delete(store.TableWorkers, w)
	a.dropCatalog(c.WorkerId)
	return &Result{}
}

// rebuildCatalog fills an empty catalog from the Workers of a snapshot
// written before the catalog existed: Workers in id order, the first policy
// of a tool wins and a Worker that gives it another does not serve it.
func rebuildCatalog(tx *store.Txn) {
	if tx.HasWorkerTools() {
		return
	}
	a := &applier{tx: tx}
	for _, w := range store.All[*fsmpb.WorkerInfo](tx, store.TableWorkers, store.IndexID) {
		for _, t := range w.Tools {
			if cur := a.toolSpec(t.Name); cur == nil {
				a.insert(store.TableTools, catalogSpec(t))
			} else if !samePolicy(cur, t) {
				continue
			}
			a.insert(store.TableWorkerTools, &fsmpb.WorkerTool{Tool: t.Name, WorkerId: w.Id, Agents: t.Agents})
		}
	}
}
