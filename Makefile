GO ?= go
BIN := bin
PROTO_DIR := api/proto
PROTOS := $(wildcard $(PROTO_DIR)/dex/v1/*.proto)

.PHONY: build test run proto fuzz bench vet clean

build:
	$(GO) build -o $(BIN)/ ./cmd/...

proto:
	PATH="$$PATH:$$($(GO) env GOPATH)/bin" protoc -I $(PROTO_DIR) \
		--go_out=. --go_opt=module=github.com/dexhq/dex \
		--go-grpc_out=. --go-grpc_opt=module=github.com/dexhq/dex \
		$(PROTOS)
