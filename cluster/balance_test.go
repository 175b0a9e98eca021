package cluster

import "testing"

func TestPlanTransferMovesOneLeadershipToTheVoterLeadingFewest(t *testing.T) {
	for _, c := range []struct {
		name    string
		self    string
		leaders []string
		voters  []string
		want    leadershipPlan
		ok      bool
	}{
		{"within its share", "n1", []string{"n1", "n2", "n3"}, []string{"n1", "n2", "n3"}, leadershipPlan{}, false},
		{"two of three", "n1", []string{"n1", "n1", "n3"}, []string{"n1", "n2", "n3"}, leadershipPlan{k: 1, to: "n2"}, true},
		{"all three, partition 0 moves last", "n1", []string{"n1", "n1", "n1"}, []string{"n1", "n2", "n3"}, leadershipPlan{k: 2, to: "n2"}, true},
		{"another node's excess is its own to move", "n2", []string{"n1", "n1", "n2"}, []string{"n1", "n2", "n3"}, leadershipPlan{}, false},
		{"a share of two", "n1", []string{"n1", "n1", "n2", "n3", "n2", "n3"}, []string{"n1", "n2", "n3"}, leadershipPlan{}, false},
		{"ceil of 4 over 3 is 2", "n1", []string{"n1", "n1", "n2", "n3"}, []string{"n1", "n2", "n3"}, leadershipPlan{}, false},
		{"3 of 4", "n1", []string{"n1", "n1", "n1", "n3"}, []string{"n1", "n2", "n3"}, leadershipPlan{k: 2, to: "n2"}, true},
		{"a voter passed over (down) leaves two to lead three", "n1", []string{"n1", "n1", "n2"}, []string{"n1", "n2"}, leadershipPlan{}, false},
		{"no leader known counts for no one", "n1", []string{"n1", "", "n1"}, []string{"n1", "n2", "n3"}, leadershipPlan{k: 2, to: "n2"}, true},
		{"no voters", "n1", []string{"n1", "n1"}, nil, leadershipPlan{}, false},
	} {
		got, ok := planTransfer(c.self, c.leaders, c.voters)
		if ok != c.ok || got != c.want {
			t.Errorf("%s: planTransfer(%s, %v, %v) = %+v %v, want %+v %v", c.name, c.self, c.leaders, c.voters, got, ok, c.want, c.ok)
		}
	}
}
