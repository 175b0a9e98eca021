package server

import (
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"

	"github.com/dexhq/dex/api/wirecodec"
)

// frame is one message's wire bytes, carried through undecoded: what a
// partitioned node reads first to route a call, and what it relays when
// it forwards the call to another node.
type frame struct{ b []byte }

// frameCodec passes frames through and codes every other message as the
// wire codec does.
type frameCodec struct{ wirecodec.Codec }

var _ encoding.CodecV2 = frameCodec{}

func (c frameCodec) Marshal(v any) (mem.BufferSlice, error) {
	if f, ok := v.(*frame); ok {
		return mem.BufferSlice{mem.SliceBuffer(f.b)}, nil
	}
	return c.Codec.Marshal(v)
}

func (c frameCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if f, ok := v.(*frame); ok {
		f.b = data.Materialize()
		return nil
	}
	return c.Codec.Unmarshal(data, v)
}

// decodeFrame decodes f into v (a request message).
func decodeFrame(f *frame, v any) error {
	return frameCodec{}.Unmarshal(mem.BufferSlice{mem.SliceBuffer(f.b)}, v)
}
