"""Generated protobuf and gRPC stubs of api/proto/dex/v1 (make proto regenerates them)."""
