package wirecodec

import (
	"bytes"
	"strings"
	"testing"

	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // gRPC's default codec, to compare with
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// task is a poll's answer as a Worker gets it: a model input with history.
func task(entries int, text string) *dexv1.PollTaskResponse {
	in := &dexv1.ModelInput{}
	for i := range entries {
		in.History = append(in.History, &dexv1.HistoryEntry{Seq: uint64(i + 1), Kind: dexv1.HistoryKind_HISTORY_KIND_ASSISTANT, Text: text,
			ToolCalls: []*dexv1.ToolCall{{CallId: "c1", Tool: "search", Arguments: `{"q":"x"}`}}})
	}
	return &dexv1.PollTaskResponse{Tasks: []*dexv1.Task{{
		Ref: &dexv1.AttemptRef{StepId: "s1/3", Attempt: 2, Token: "tok"}, SessionId: "s1",
		Kind: dexv1.StepKind_STEP_KIND_RUN_MODEL, ModelInput: in,
	}}}
}

func flat(t *testing.T, b mem.BufferSlice) []byte {
	t.Helper()
	out := b.Materialize()
	b.Free()
	return out
}

// A peer on gRPC's own codec (the Python and TypeScript libraries, any
// generated client) reads what Dex writes: the bytes are the same.
func TestMarshalWritesWhatTheDefaultCodecWrites(t *testing.T) {
	std := encoding.GetCodecV2("proto")
	for _, msg := range []proto.Message{
		&dexv1.ClaimTaskResponse{},
		task(3, "short"),
		task(200, strings.Repeat("long output ", 100)), // over the pooling threshold
	} {
		got, err := Codec{}.Marshal(msg)
		if err != nil {
			t.Fatal(err)
		}
		want, err := std.Marshal(msg)
		if err != nil {
			t.Fatal(err)
		}
		if g, w := flat(t, got), flat(t, want); !bytes.Equal(g, w) {
			t.Fatalf("%T: %d bytes, gRPC's codec writes %d", msg, len(g), len(w))
		}
	}
}

func TestUnmarshalReadsBackAndChecksStrings(t *testing.T) {
	msg := task(5, "hello")
	b, err := Codec{}.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	got := &dexv1.PollTaskResponse{}
	if err := (Codec{}).Unmarshal(b, got); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, msg) {
		t.Fatalf("read back %v, wrote %v", got, msg)
	}
	// A peer that sends a string that is not UTF-8 is refused, as gRPC's
	// own codec refuses it.
	bad := (&dexv1.HistoryEntry{Text: "\xff\xfe"})
	raw, err := bad.MarshalVT()
	if err != nil {
		t.Fatal(err)
	}
	if err := (Codec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(raw)}, &dexv1.HistoryEntry{}); err == nil {
		t.Fatal("a string that is not UTF-8 was accepted")
	}
}

func TestRefusesWhatIsNotAMessage(t *testing.T) {
	if _, err := (Codec{}).Marshal("text"); err == nil || !strings.Contains(err.Error(), "not a protobuf message") {
		t.Fatalf("Marshal(string): %v", err)
	}
	if err := (Codec{}).Unmarshal(nil, new(int)); err == nil || !strings.Contains(err.Error(), "not a protobuf message") {
		t.Fatalf("Unmarshal(*int): %v", err)
	}
}
