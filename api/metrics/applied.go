package metrics

import (
	"strings"
	"sync"

	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// Applied is chained to the state machine's OnApplied: it counts the
// attempts that ended, observes claim latencies and the durations of the
// Steps that finished. The rows are read from the newest state; their
// times come from the commands, so every node observes the same values.
func (m *Node) Applied(a *fsm.Applied) {
	if a == nil || m.state == nil || (len(a.Claimed) == 0 && len(a.Ended) == 0 && len(a.Finished) == 0) {
		return
	}
	st := m.state()
	for _, k := range a.Claimed {
		if step, at := attemptOf(st, k); at != nil && at.ClaimedAtMs != 0 {
			if o := m.claimByKind[step.Kind]; o != nil {
				o.Observe(seconds(at.ClaimedAtMs - at.StartedAtMs))
			}
		}
	}
	for _, k := range a.Ended {
		if step, at := attemptOf(st, k); at != nil {
			m.attempts.WithLabelValues(fsm.KindName(step.Kind), word(at.Status.String(), "ATTEMPT_STATUS_"), errorType(at)).Inc()
		}
	}
	for _, id := range a.Finished {
		step := st.Step(id)
		if step == nil || step.EndedAtMs == 0 {
			continue // deleted later in the same batch
		}
		m.stepDuration.WithLabelValues(fsm.KindName(step.Kind), m.tools.label(st, step.Tool), fsm.OutcomeName(step.Outcome)).
			Observe(seconds(step.EndedAtMs - step.CreatedAtMs))
		if u := step.Usage; u != nil {
			m.countUsage(step.Agent, u)
			if s := st.Session(step.SessionId); s != nil {
				key := m.fairnessKeys.label(s.FairnessKey)
				m.keyTokens.WithLabelValues(key).Add(float64(u.InputTokens + u.OutputTokens))
				m.keyCost.WithLabelValues(key).Add(float64(u.CostMicros))
			}
		}
	}
}

// countUsage adds a model call's reported usage to the usage counters.
func (m *Node) countUsage(agent string, u *fsmpb.Usage) {
	if agent == "" {
		agent = "default"
	}
	model := u.Model
	if model == "" {
		model = "unknown"
	}
	m.modelTokens.WithLabelValues(agent, model, "input").Add(float64(u.InputTokens))
	m.modelTokens.WithLabelValues(agent, model, "output").Add(float64(u.OutputTokens))
	m.modelCost.WithLabelValues(agent).Add(float64(u.CostMicros))
}

// maxFairnessKeyLabels bounds the fairness_key label's values: keys are
// named by clients (a tenant, a user), so past this many the rest share
// "_other".
const maxFairnessKeyLabels = 64

// boundedLabels hands out a label value per name, up to max names.
type boundedLabels struct {
	mu   sync.Mutex
	seen map[string]bool
	max  int
}

func (b *boundedLabels) label(name string) string {
	if name == "" {
		return "none"
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.seen[name] {
		return name
	}
	if len(b.seen) >= b.max {
		return "_other"
	}
	if b.seen == nil {
		b.seen = map[string]bool{}
	}
	b.seen[name] = true
	return name
}

func attemptOf(st *fsm.State, k fsm.AttemptKey) (*fsmpb.Step, *fsmpb.Attempt) {
	step := st.Step(k.Step)
	if step == nil || k.N == 0 || int(k.N) > len(step.Attempts) {
		return nil, nil
	}
	return step, step.Attempts[k.N-1]
}

func errorType(at *fsmpb.Attempt) string {
	if at.Status == fsmpb.AttemptStatus_ATTEMPT_STATUS_SUCCEEDED {
		return "none"
	}
	if at.ErrorType == fsmpb.ErrorType_ERROR_TYPE_UNSPECIFIED {
		if at.Status == fsmpb.AttemptStatus_ATTEMPT_STATUS_EXPIRED {
			return "expired"
		}
		return "unspecified"
	}
	return word(at.ErrorType.String(), "ERROR_TYPE_")
}

func word(name, prefix string) string { return strings.ToLower(strings.TrimPrefix(name, prefix)) }
