//go:build tools

package dex
import (
_ "github.com/hashicorp/raft"
_ "github.com/hashicorp/raft-boltdb/v2"
_ "github.com/hashicorp/go-memdb"
_ "github.com/hashicorp/go-hclog"
_ "go.uber.org/zap"
_ "google.golang.org/grpc"
_ "google.golang.org/protobuf/proto"
_ "github.com/spf13/cobra"
_ "github.com/prometheus/client_golang/prometheus"
_ "go.etcd.io/bbolt"
)
