package server

import (
	"context"
	"sort"
	"time"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// LivenessView is the leader's memory of Worker contacts (lease.Workers).
type LivenessView interface {
	Contacts() (seen map[string]time.Time, open map[string]int)
}

// ListWorkers answers from this node's state: the registered Workers and
// the Steps per tool. Only the leader knows contacts and health, so a
// follower leaves them unset and says it is not the leader.
func (a *Admin) ListWorkers(ctx context.Context, _ *dexv1.ListWorkersRequest) (*dexv1.ListWorkersResponse, error) {
	st := a.node.State()
	out := &dexv1.ListWorkersResponse{AnsweredBy: a.node.Status().ID, Leader: a.node.IsLeader()}
	var seen map[string]time.Time
	var open map[string]int
	if out.Leader && a.live != nil {
		seen, open = a.live.Contacts()
	}
	health := map[string]*dexv1.WorkerHealth{}
	if out.Leader {
		for _, h := range a.workerHealth() {
			health[h.WorkerId] = h
		}
	}
	for _, w := range st.Workers() {
		ws := &dexv1.WorkerStatus{Worker: w.API(), OpenPolls: uint32(open[w.Id]), Health: health[w.Id]}
		if t, ok := seen[w.Id]; ok {
			ws.LastContactMs = t.UnixMilli()
		}
		out.Workers = append(out.Workers, ws)
	}
	tools := map[string]*dexv1.ToolQueue{}
	queue := func(name string) *dexv1.ToolQueue {
		q := tools[name]
		if q == nil {
			q = &dexv1.ToolQueue{Tool: name}
			tools[name] = q
		}
		return q
	}
	for _, t := range st.Tools() {
		queue(t.Name).Workers = st.ToolServers(t.Name)
	}
	for _, s := range st.StepsWithStatus(fsmpb.StepStatus_STEP_STATUS_QUEUED) {
		queue(s.Tool).Queued++
	}
	for _, s := range st.StepsWithStatus(fsmpb.StepStatus_STEP_STATUS_RUNNING) {
		queue(s.Tool).Running++
	}
	for _, s := range st.StepsWithStatus(fsmpb.StepStatus_STEP_STATUS_WAITING) {
		queue(s.Tool).Waiting++
	}
	for _, q := range tools {
		out.Tools = append(out.Tools, q)
	}
	sort.Slice(out.Tools, func(i, j int) bool { return out.Tools[i].Tool < out.Tools[j].Tool })
	return out, nil
}
