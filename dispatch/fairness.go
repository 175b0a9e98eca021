package dispatch

import (
	"container/heap"
	"slices"
)

// fairStride is a fairness key's pass step for one Step at weight 1: a key
// of weight w adds fairStride/w, so keys share dispatch by weight (stride
// scheduling).
const fairStride = 1 << 20

// dispatchOrder is what the order of lanes reads (lanesLess): each session's
// last served tick and each fairness key's pass. It lives in the leader's
// memory; a new leader starts every key and session even.
type dispatchOrder struct {
	// served: a tick per session, taken when it was last handed a Step.
	served map[string]uint64
	tick   uint64
	keys   map[string]*fairKey
	// vtime: the highest pass a key had when it was served. A key that
	// becomes ready again starts there, so time spent idle is no credit.
	vtime uint64
}

// fairKey is one fairness key's dispatch so far and where its groups are.
type fairKey struct {
	pass   uint64
	ready  int      // its ready Steps in every queue
	groups []*group // its non-empty groups, in every queue
}

func newDispatchOrder() *dispatchOrder {
	return &dispatchOrder{served: map[string]uint64{}, keys: map[string]*fairKey{}}
}

func (o *dispatchOrder) passOf(key string) uint64 {
	if f := o.keys[key]; f != nil {
		return f.pass
	}
	return 0
}

func (o *dispatchOrder) key(key string) *fairKey {
	f := o.keys[key]
	if f == nil {
		f = &fairKey{pass: o.vtime}
		o.keys[key] = f
	}
	return f
}

// readied counts a Step of key becoming ready; a key idle until now starts
// at the virtual time.
func (o *dispatchOrder) readied(key string) {
	f := o.key(key)
	if f.ready == 0 {
		f.pass = max(f.pass, o.vtime)
	}
	f.ready++
}

// unreadied counts a Step of key leaving the ready queues.
func (o *dispatchOrder) unreadied(key string) {
	if f := o.keys[key]; f != nil {
		f.ready--
	}
}

// charge adds one Step of weight to key and moves its groups back.
func (o *dispatchOrder) charge(key string, weight uint32) {
	f := o.key(key)
	o.vtime = max(o.vtime, f.pass)
	f.pass += fairStride / uint64(max(weight, 1))
	for _, g := range f.groups {
		heap.Fix(&g.sub.groups, g.idx)
	}
}

func (o *dispatchOrder) addGroup(g *group) {
	f := o.key(g.key.fairness)
	f.groups = append(f.groups, g)
}

func (o *dispatchOrder) dropGroup(g *group) {
	if f := o.keys[g.key.fairness]; f != nil {
		if i := slices.Index(f.groups, g); i >= 0 {
			f.groups = slices.Delete(f.groups, i, i+1)
		}
	}
}

// prune forgets sessions and keys with nothing ready once there are many:
// what it forgets would start even again anyway.
func (o *dispatchOrder) prune(readySessions map[string][]*lane) {
	if len(o.served) > 4096 && len(o.served) > 4*len(readySessions) {
		for id := range o.served {
			if readySessions[id] == nil {
				delete(o.served, id)
			}
		}
	}
	if len(o.keys) > 4096 {
		for k, f := range o.keys {
			if f.ready == 0 && f.pass <= o.vtime {
				delete(o.keys, k)
			}
		}
	}
}
