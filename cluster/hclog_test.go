package cluster

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

func TestHCLogLinesAreReadableJSON(t *testing.T) {
	var buf bytes.Buffer
	core := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(&buf), zapcore.InfoLevel)
	hl := NewHCLogger(zap.New(core).With(zap.String("node", "n1")), "raft")

	// As raft logs its first line and its candidate state.
	servers := []raft.Server{{Suffrage: raft.Voter, ID: "n1", Address: "127.0.0.1:7001"}}
	hl.Info("initial configuration", "index", 1, "servers", hclog.Fmt("%+v", servers))
	hl.Info("entering candidate state", "node", "Node at 127.0.0.1:7001 [Candidate]", "term", 2)

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("lines:\n%s", buf.String())
	}
	var first map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	if s, _ := first["servers"].(string); !strings.Contains(s, "ID:n1") || strings.Contains(s, "%+v") {
		t.Fatalf("servers = %#v; want the formatted configuration", first["servers"])
	}
	if n := strings.Count(lines[1], `"node":`); n != 1 {
		t.Fatalf("the candidate line has the key node %d times: %s", n, lines[1])
	}
	var second map[string]any
	if err := json.Unmarshal([]byte(lines[1]), &second); err != nil {
		t.Fatal(err)
	}
	if second["node"] != "n1" || !strings.HasPrefix(second["raft_node"].(string), "Node at") {
		t.Fatalf("candidate line %v; want node n1 and raft_node", second)
	}
}
