package console

// agentLabel is how the pages name a session's agent: "-" for the default
// agent (""), which most sessions run.
func agentLabel(agent string) string {
	if agent == "" {
		return "-"
	}
	return agent
}
