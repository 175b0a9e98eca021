// Package wirecodec is the gRPC codec of Dex's servers and Go clients: the
// protobuf wire format, marshalled by the code generated for each message
// (no reflection), read back by the protobuf library, which checks what a
// peer sent (UTF-8 strings included) as gRPC's own codec does.
package wirecodec

import (
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// Name is the codec's name: the content subtype stays "proto", so a peer
// with gRPC's default codec reads and writes the same messages.
const Name = "proto"

// generated is what the generated marshalling code of a Dex message has.
type generated interface {
	SizeVT() int
	MarshalToSizedBufferVT([]byte) (int, error)
}

// Codec marshals with the generated code and unmarshals with the protobuf
// library.
type Codec struct{}

var _ encoding.CodecV2 = Codec{}

// Name implements encoding.CodecV2.
func (Codec) Name() string { return Name }

// Marshal implements encoding.CodecV2.
func (Codec) Marshal(v any) (mem.BufferSlice, error) {
	g, ok := v.(generated)
	if !ok {
		m, ok := v.(proto.Message)
		if !ok {
			return nil, fmt.Errorf("marshal: %T is not a protobuf message", v)
		}
		b, err := proto.Marshal(m)
		if err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	size := g.SizeVT()
	if mem.IsBelowBufferPoolingThreshold(size) {
		b := make([]byte, size)
		if _, err := g.MarshalToSizedBufferVT(b); err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	pool := mem.DefaultBufferPool()
	buf := pool.Get(size)
	if _, err := g.MarshalToSizedBufferVT((*buf)[:size]); err != nil {
		pool.Put(buf)
		return nil, err
	}
	return mem.BufferSlice{mem.NewBuffer(buf, pool)}, nil
}

// Unmarshal implements encoding.CodecV2.
func (Codec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("unmarshal: %T is not a protobuf message", v)
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	return proto.Unmarshal(buf.ReadOnlyData(), m)
}

// ServerOption makes a server use the codec.
func ServerOption() grpc.ServerOption { return grpc.ForceServerCodecV2(Codec{}) }

// DialOption makes a client connection use the codec.
func DialOption() grpc.DialOption {
	return grpc.WithDefaultCallOptions(grpc.ForceCodecV2(Codec{}))
}
