// Package haproxy holds Dex's HAProxy configuration (haproxy.cfg), embedded
// so the chaos harness runs the very file that ships.
package haproxy

import _ "embed"

// Config is haproxy.cfg. Its addresses come from the environment variables
// it documents (DEX_LB_ADDR, DEX_Nk_GRPC, DEX_Nk_HTTP_PORT), with defaults
// for `make run`.
//
//go:embed haproxy.cfg
var Config string
