package dispatch

// InFlightCount is how many of the pipeline's proposals raft has not
// answered.
func (p *Pipeline) InFlightCount() int { return p.inFlight.count() }
