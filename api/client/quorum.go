package client

import (
	"fmt"
	"strings"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// NoQuorumError says that too few voters answer for the cluster to elect a
// leader: no node will serve clients until more of them are back, so
// waiting for a takeover does not help.
type NoQuorumError struct {
	Reachable, Voters int
	// Down are the ids of the voters that do not answer.
	Down []string
}

func (e *NoQuorumError) Error() string {
	return fmt.Sprintf("%d of %d voters reachable: no quorum (%s not answering); the cluster serves again once %d answer",
		e.Reachable, e.Voters, strings.Join(e.Down, ", "), e.Voters/2+1)
}

// CheckQuorum reads an admin Status answer (any node gives one, with each
// member's state as that node sees it) and returns a *NoQuorumError when
// the voters that answer are not a majority, else nil.
func CheckQuorum(st *dexv1.StatusResponse) error {
	e := &NoQuorumError{}
	for _, n := range st.GetNodes() {
		if n.GetSuffrage() != "voter" {
			continue
		}
		e.Voters++
		if n.GetState() == "unreachable" {
			e.Down = append(e.Down, n.GetId())
		} else {
			e.Reachable++
		}
	}
	if e.Voters == 0 || e.Reachable*2 > e.Voters {
		return nil
	}
	return e
}
