package main

import (
	"bytes"
	"encoding/json"
	"testing"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

func TestStatusJSONHasEachNodesIndexes(t *testing.T) {
	r := &dexv1.StatusResponse{Leader: "n1", Nodes: []*dexv1.NodeStatus{
		{Id: "n1", State: "leader", Term: 4, CommitIndex: 90, AppliedIndex: 89},
		{Id: "n2", State: "unreachable"},
	}}
	var js bytes.Buffer
	if err := printStatusJSON(&js, r); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Nodes []map[string]any `json:"nodes"`
	}
	if err := json.Unmarshal(js.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	n1, n2 := got.Nodes[0], got.Nodes[1]
	if n1["term"] != 4.0 || n1["commit_index"] != 90.0 || n1["applied_index"] != 89.0 {
		t.Fatalf("n1 JSON %v: want term 4, commit_index 90, applied_index 89", n1)
	}
	if _, ok := n2["commit_index"]; ok {
		t.Fatalf("an unreachable node has indexes in JSON: %v", n2)
	}
}
