package server

import (
	livestream "github.com/dexhq/dex/lease/stream"
)

// maxCoalesced bounds how many waiting deltas one send takes in, and
// maxCoalescedText how much text one merged delta carries.
const (
	maxCoalesced     = 256
	maxCoalescedText = 64 << 10
)

// coalesced is buf with d and what more holds behind it now (at most maxCoalesced
// deltas, without waiting), each run of one attempt's contiguous text
// merged into one delta of at most maxCoalescedText bytes. A watcher that
// fell behind then catches up in a few large sends instead of one per
// delta; one that keeps up sends d alone, at once. Order is kept: a delta
// of another attempt, or an attempt's end, closes the run. closed: more
// was closed meanwhile (the watcher was dropped). buf (empty) is reused
// from one send to the next.
func coalesced(buf []livestream.Delta, d livestream.Delta, more <-chan livestream.Delta) (out []livestream.Delta, closed bool) {
	out = append(buf, d)
	for range maxCoalesced - 1 {
		var next livestream.Delta
		var ok bool
		select {
		case next, ok = <-more:
		default:
			return out, false
		}
		if !ok {
			return out, true
		}
		last := &out[len(out)-1]
		if last.Kind == livestream.Text && next.Kind == livestream.Text && last.Key == next.Key &&
			last.Offset+uint64(len(last.Text)) == next.Offset && len(last.Text)+len(next.Text) <= maxCoalescedText {
			last.Text += next.Text
			continue
		}
		out = append(out, next)
	}
	return out, false
}
