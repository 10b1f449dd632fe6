package sim

// Event kinds. At equal times they run in the order the heap yields them,
// which depends only on the sequence of pushes, so runs are deterministic.
const (
	evArrival    uint8 = iota // the next request arrives at the app
	evDone                    // container id finishes its request
	evReady                   // container id finishes its cold start
	evTick                    // the policy's planning tick
	evExpire                  // idle container id reaches its keep-alive
	evWake                    // a Waker policy asked to plan now
	evPlanStart               // the oracle's plan starts planned container id
	evPlanRetire              // the oracle's plan stops planned container id
)

type event struct {
	at   int64
	seq  uint64 // tie-break: earlier push first
	id   int32
	kind uint8
}

func (a *event) before(b *event) bool {
	return a.at < b.at || (a.at == b.at && a.seq < b.seq)
}

// eventHeap is a 4-ary min-heap by (at, seq): shallower than a binary heap,
// so fewer cache misses per pop on the simulator's hottest path. The
// next arrival, of which at most one is pending, waits beside the heap
// instead of in it: every request pushes and pops one, and comparing it
// with the heap's top costs less than a trip through the heap. It keeps
// its place in the push order (seq), so events pop in the same order.
type eventHeap struct {
	ev     []event
	seq    uint64
	arr    event
	hasArr bool
}

func (h *eventHeap) push(at int64, kind uint8, id int32) {
	h.seq++
	if kind == evArrival {
		if h.hasArr {
			panic("sim: two pending arrivals") // the engine draws one at a time
		}
		h.arr, h.hasArr = event{at: at, seq: h.seq, id: id, kind: kind}, true
		return
	}
	h.ev = append(h.ev, event{at: at, seq: h.seq, id: id, kind: kind})
	i := len(h.ev) - 1
	e := h.ev[i]
	for i > 0 {
		p := (i - 1) / 4
		if !e.before(&h.ev[p]) {
			break
		}
		h.ev[i] = h.ev[p]
		i = p
	}
	h.ev[i] = e
}

func (h *eventHeap) pop() event {
	if h.hasArr && (len(h.ev) == 0 || h.arr.before(&h.ev[0])) {
		h.hasArr = false
		return h.arr
	}
	top := h.ev[0]
	last := len(h.ev) - 1
	e := h.ev[last]
	h.ev = h.ev[:last]
	if last == 0 {
		return top
	}
	i := 0
	for {
		c := 4*i + 1
		if c >= last {
			break
		}
		best := c
		for k := c + 1; k < min(c+4, last); k++ {
			if h.ev[k].before(&h.ev[best]) {
				best = k
			}
		}
		if !h.ev[best].before(&e) {
			break
		}
		h.ev[i] = h.ev[best]
		i = best
	}
	h.ev[i] = e
	return top
}

func (h *eventHeap) len() int {
	if h.hasArr {
		return len(h.ev) + 1
	}
	return len(h.ev)
}

// firstAt is the time of the event pop would return; the heap must not
// be empty.
func (h *eventHeap) firstAt() int64 {
	if h.hasArr && (len(h.ev) == 0 || h.arr.before(&h.ev[0])) {
		return h.arr.at
	}
	return h.ev[0].at
}
