package server

import (
	"fmt"
	"strconv"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/dexhq/dex/api/wirerules"
	"github.com/dexhq/dex/cluster"
)

// PartitionMetadataKey names, on a Worker's PollTask, the partition it
// polls (absent: 0), and on a forwarded call, the partition the sender
// routed it to.
const PartitionMetadataKey = cluster.PartitionMetadataKey

// forwardedMetadataKey marks a call one node forwarded to another: the
// receiver serves it itself or refuses it, and never forwards it again.
const forwardedMetadataKey = "dex-forwarded-by"

// partitionOf is the partition, of n, that a call of route r
// (wirerules.Routes) with first message raw and metadata md goes to; pick
// chooses one for a session that names no id.
func partitionOf(r wirerules.Route, raw []byte, md metadata.MD, n int, pick func() int) (k int, err error) {
	switch r.Kind {
	case wirerules.BySession:
		return wirerules.PartitionOf(stringField(raw, r.Field), n), nil
	case wirerules.ByStep, wirerules.ByAttempt:
		msg := raw
		if r.Kind == wirerules.ByAttempt {
			msg = messageField(raw, r.Field)
		}
		step := stringField(msg, 1)
		session, _, ok := wirerules.ParseStepID(step)
		if !ok {
			// The handler refuses the id with its own message.
			return 0, nil
		}
		return wirerules.PartitionOf(session, n), nil
	case wirerules.Create:
		if parent := stringField(raw, wirerules.ParentField); parent != "" {
			return wirerules.PartitionOf(parent, n), nil
		}
		if id := stringField(raw, r.Field); id != "" {
			return wirerules.PartitionOf(id, n), nil
		}
		return pick(), nil
	case wirerules.Polled, wirerules.Local:
		return polledPartition(md, n)
	case wirerules.Registry:
		return 0, nil
	}
	return 0, fmt.Errorf("route kind %d names no partition", r.Kind)
}

// polledPartition reads a PollTask's dex-partition metadata.
func polledPartition(md metadata.MD, n int) (int, error) {
	v := md.Get(PartitionMetadataKey)
	if len(v) == 0 {
		return 0, nil
	}
	k, err := strconv.Atoi(v[0])
	if err != nil || k < 0 || k >= n {
		return 0, fmt.Errorf("%s %q: this cluster has partitions 0 to %d", PartitionMetadataKey, v[0], n-1)
	}
	return k, nil
}

// stringField is the last value of string field num in a message's wire
// bytes ("" when absent or unreadable: the handler then refuses the
// request with its own words).
func stringField(b []byte, num protowire.Number) string {
	return string(bytesField(b, num))
}

// messageField is the wire bytes of message field num (nil when absent).
func messageField(b []byte, num protowire.Number) []byte { return bytesField(b, num) }

func bytesField(b []byte, num protowire.Number) []byte {
	var out []byte
	for len(b) > 0 {
		n, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return nil
		}
		b = b[l:]
		if n == num && typ == protowire.BytesType {
			v, l := protowire.ConsumeBytes(b)
			if l < 0 {
				return nil
			}
			out, b = v, b[l:]
			continue
		}
		l = protowire.ConsumeFieldValue(n, typ, b)
		if l < 0 {
			return nil
		}
		b = b[l:]
	}
	return out
}
