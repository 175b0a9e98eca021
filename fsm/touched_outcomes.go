package fsm

// AttemptKey names one attempt of a Step.
type AttemptKey struct {
	Step string
	N    uint32
}

// outcomes are the transitions one command made that metrics count: what
// the touched rows alone cannot tell (a Step touched twice in a batch, or
// touched again after it finished, would be counted twice).
type outcomes struct {
	claimed, ended []AttemptKey
	finished       []string
}

func (t *touched) attemptClaimed(step string, n uint32) {
	t.out.claimed = append(t.out.claimed, AttemptKey{step, n})
}

func (t *touched) attemptEnded(step string, n uint32) {
	t.out.ended = append(t.out.ended, AttemptKey{step, n})
}

func (t *touched) stepFinished(step string) {
	t.out.finished = append(t.out.finished, step)
}
