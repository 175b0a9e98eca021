package metrics

import (
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/dexhq/dex/fsm"
	"github.com/dexhq/dex/fsm/fsmpb"
)

// commandNames are the Command body types by field number ("start_attempt").
var commandNames = func() map[int32]string {
	out := map[int32]string{}
	fields := (&fsmpb.Command{}).ProtoReflect().Descriptor().Oneofs().ByName("body").Fields()
	for i := range fields.Len() {
		f := fields.Get(i)
		out[int32(f.Number())] = string(f.Name())
	}
	return out
}()

// commandOf finds the body field of an encoded Command by walking its top
// level fields, without decoding it (0 when there is none).
func commandOf(data []byte) int32 {
	for len(data) > 0 {
		num, typ, n := protowire.ConsumeTag(data)
		if n < 0 {
			return 0
		}
		data = data[n:]
		if _, ok := commandNames[int32(num)]; ok {
			return int32(num)
		}
		n = protowire.ConsumeFieldValue(num, typ, data)
		if n < 0 {
			return 0
		}
		data = data[n:]
	}
	return 0
}

// ObserveApply is the cluster's ApplyObserver: each entry's share of its
// batch's time by command type, and the rejected commands by reason code.
func (m *Node) ObserveApply(entries []fsm.Entry, results []*fsm.Result, took time.Duration) {
	if len(entries) == 0 {
		return
	}
	share := took.Seconds() / float64(len(entries))
	for i, e := range entries {
		num := commandOf(e.Data)
		if o := m.applyByCommand[num]; o != nil {
			o.Observe(share)
		}
		if i < len(results) && results[i] != nil && results[i].Err != nil {
			name := commandNames[num]
			if name == "" {
				name = "unknown"
			}
			m.rejected.WithLabelValues(name, results[i].Err.Code.String()).Inc()
		}
	}
}
