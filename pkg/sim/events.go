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
// so fewer cache misses per pop on the simulator's hottest path.
type eventHeap struct {
	ev  []event
	seq uint64
}

func (h *eventHeap) push(at int64, kind uint8, id int32) {
	h.seq++
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

func (h *eventHeap) len() int { return len(h.ev) }
