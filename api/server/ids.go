package server

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/dexhq/dex/fsm"
)

// Every request's ids are checked before any handler runs, by field name,
// so a new RPC is covered without a line of its own: session and Step ids
// must hold only fsm.IDChars, message ids and idempotency keys must print.
var (
	idFields  = map[protoreflect.Name]bool{"session_id": true, "parent_id": true, "step_id": true, "schedule_id": true}
	keyFields = map[protoreflect.Name]bool{"idempotency_key": true, "message_id": true}
)

// idOptions install the check on unary calls and on a stream's first message.
func idOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if err := checkIDs(req); err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			return h(srv, &checkedStream{ServerStream: ss})
		}),
	}
}

type checkedStream struct{ grpc.ServerStream }

func (s *checkedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return checkIDs(m)
}

// checkIDs checks the id fields of req and of the messages it holds (one
// level down: an AttemptRef's step_id).
func checkIDs(req any) error {
	m, ok := req.(proto.Message)
	if !ok {
		return nil
	}
	return checkMessage(m.ProtoReflect(), 2)
}

func checkMessage(m protoreflect.Message, depth int) error {
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() || fd.IsMap():
		case fd.Kind() == protoreflect.StringKind:
			var r *fsm.Rejection
			switch {
			case idFields[fd.Name()]:
				r = fsm.CheckID(string(fd.Name()), v.String())
			case keyFields[fd.Name()]:
				r = fsm.CheckKey(string(fd.Name()), v.String())
			}
			if r != nil {
				err = status.Error(codes.InvalidArgument, r.Reason)
			}
		case fd.Kind() == protoreflect.MessageKind && depth > 1:
			err = checkMessage(v.Message(), depth-1)
		}
		return err == nil
	})
	return err
}
