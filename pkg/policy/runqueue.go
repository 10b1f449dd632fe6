package policy

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// Entry is what the run order knows of one queued request. Times are
// nanoseconds on the driver's clock (virtual for the simulator, time since
// start for the gateway).
type Entry struct {
	Enq      int64 // when it entered this function's queue
	Deadline int64 // absolute time by which it must finish at this function
	Pred     int64 // predicted execution time (policy.Estimate), 0 when the order does not need it
}

// Queued is one queued request as Ordered lists it.
type Queued[T any] struct {
	Entry
	Value T
}

// RunQueue is one function's queue of waiting requests in the policy's run
// order. The simulator and the live gateway both order their queues with it,
// so a policy evaluated in simulation runs requests in the same order live.
//
// Every order is a min-heap by (key, push sequence) with a different key;
// the sequence makes the order total, so equal keys pop in push order and a
// run is deterministic. LeastSlack adds a second heap for the requests it
// set aside. A RunQueue is not safe for concurrent use.
type RunQueue[T any] struct {
	order Order
	round int64 // HeaviestFirst's round length, ns; at least 1
	main  runHeap[T]
	// late holds the requests LeastSlack found unable to meet their
	// deadline, keyed by Enq; they run only when main is empty.
	late runHeap[T]
	// aside lists the late requests in the order they were set aside, so
	// that OrderedFirst lists the first of them without scanning late.
	aside asideLog[T]
	// scratch is Ordered's sorting buffer, kept so that the planning tick
	// of a driver does not allocate; idx is OrderedFirst's.
	scratch []slot[T]
	idx     []int32
	// enqs answers OldestEnq without a scan of main.
	enqs enqLog
}

// enqLog lists main's pushes in push order with their Enq, and marks those
// that left main. Both drivers push at their clock's now, so Enq never
// decreases from one push to the next, and the oldest request in main is
// then the first listed that has not left: OldestEnq costs O(1) amortised
// instead of a scan of the backlog, which under overload was a tenth of
// the simulator's time. A push with a smaller Enq than the one before
// turns the log off until the queue is empty again, and OldestEnq scans.
type enqLog struct {
	off  bool
	last int64
	// base is the heap seq of enq[0]; head the first entry not yet known
	// to have left.
	base uint64
	head int
	enq  []int64
	gone []bool
}

func (l *enqLog) push(seq uint64, enq int64) {
	switch {
	case l.off:
		return
	case len(l.enq) > 0 && enq < l.last:
		l.off = true
		return
	case len(l.enq) == 0:
		l.base, l.head = seq, 0
	}
	l.last = enq
	l.enq = append(l.enq, enq)
	l.gone = append(l.gone, false)
}

// left marks the request pushed as seq gone from main.
func (l *enqLog) left(seq uint64) {
	if l.off || seq < l.base {
		return
	}
	if i := int(seq - l.base); i < len(l.gone) {
		l.gone[i] = true
	}
}

// oldest is the smallest Enq in main, when the log is on and main is not
// empty.
func (l *enqLog) oldest() (int64, bool) {
	for l.head < len(l.enq) && l.gone[l.head] {
		l.head++
	}
	if l.head >= len(l.enq) {
		return 0, false
	}
	if l.head > 1024 && l.head > len(l.enq)/2 {
		// Drop the gone prefix, so the log stays the size of the queue.
		n := copy(l.enq, l.enq[l.head:])
		copy(l.gone, l.gone[l.head:])
		l.enq, l.gone = l.enq[:n], l.gone[:n]
		l.base += uint64(l.head)
		l.head = 0
	}
	return l.enq[l.head], true
}

// reset empties the log and turns it back on: the queue is empty.
func (l *enqLog) reset() {
	l.off, l.head, l.enq, l.gone = false, 0, l.enq[:0], l.gone[:0]
}

// NewRunQueue returns an empty queue for order. round is IS Reordering's
// round length (see RoundLen); it is ignored by the other orders.
func NewRunQueue[T any](order Order, round time.Duration) *RunQueue[T] {
	// A round below 1 ns would divide by zero; RoundLen never returns one.
	return &RunQueue[T]{order: order, round: max(1, int64(round))}
}

// Grow makes room for n queued requests without reallocating: a driver
// that knows its queue bound calls it once, so an overloaded backlog is
// not copied at every doubling of its heaps (large copies the garbage
// collector must also wait out).
func (q *RunQueue[T]) Grow(n int) {
	if q.order != LeastSlack {
		q.main.s = slices.Grow(q.main.s, n)
		return
	}
	// Under overload least slack sets most of the backlog aside; the main
	// heap holds only what can still meet its deadline.
	q.late.s = slices.Grow(q.late.s, n)
	q.aside.s = slices.Grow(q.aside.s, n)
	q.aside.gone = slices.Grow(q.aside.gone, n)
}

// RoundLen is the time between two reordering passes at a function whose
// SLO is slo, for a driver that plans every tick: every tick, and at least
// twice per function SLO. A scaler that passed less often could not see a
// request before its deadline had gone, and a round longer than the SLO
// lets a heavy request overtake light ones that have already spent their
// slack.
func RoundLen(tick, slo time.Duration) time.Duration {
	return max(1, min(tick, slo/2))
}

// roundSpan bounds the predicted execution times a round key orders; a
// longer prediction sorts as if it were this long. It is far above any SLO
// and leaves 2^23 rounds of any length in an int64.
const roundSpan = int64(1) << 40

// key is where e sorts in the main heap; smaller runs first.
func (q *RunQueue[T]) key(e Entry) int64 {
	switch q.order {
	case HeaviestFirst:
		return roundKey(e, q.round)
	case LeastSlack:
		return e.Deadline - e.Pred
	}
	return e.Enq
}

// roundKey is IS Reordering as Cypress's Reactive Scaler applies it: each
// pass sorts the requests that arrived since the previous pass heaviest
// first and queues them behind those it already ordered. A heavy request
// therefore overtakes the light requests of its own round but never those
// of an earlier round; one heap keyed on execution time alone would let a
// steady stream of heavy arrivals starve the light requests, which
// first-fit decreasing over a queue snapshot never does.
func roundKey(e Entry, round int64) int64 {
	return e.Enq/round*roundSpan - min(e.Pred, roundSpan-1)
}

// Push queues v.
func (q *RunQueue[T]) Push(e Entry, v T) {
	if q.Len() == 0 {
		q.enqs.reset()
	}
	q.main.push(q.key(e), e, v)
	q.enqs.push(q.main.seq, e.Enq)
}

// Pop removes and returns the request a free instance should run at time
// now. Under LeastSlack a request that can no longer meet its deadline is
// set aside behind every request that still can, to run in order of Enq
// once nothing else waits: serving the already-late first under overload
// would make every request behind them late too.
func (q *RunQueue[T]) Pop(now int64) (v T, e Entry, ok bool) {
	for len(q.main.s) > 0 {
		s := q.main.pop()
		q.enqs.left(s.seq)
		if q.order == LeastSlack && now+s.Pred > s.Deadline {
			q.late.push(s.Enq, s.Entry, s.v)
			q.aside.add(slot[T]{key: s.Enq, seq: q.late.seq, Entry: s.Entry, v: s.v})
			continue
		}
		return s.v, s.Entry, true
	}
	if len(q.late.s) > 0 {
		s := q.late.pop()
		q.aside.remove(s.seq)
		return s.v, s.Entry, true
	}
	return v, e, false
}

// Len is the number of queued requests, set-aside ones included.
func (q *RunQueue[T]) Len() int { return len(q.main.s) + len(q.late.s) }

// OldestEnq is the smallest Enq of any queued request (for View.MaxWait),
// and false when the queue is empty.
func (q *RunQueue[T]) OldestEnq() (int64, bool) {
	if q.Len() == 0 {
		return 0, false
	}
	oldest := int64(math.MaxInt64)
	if len(q.late.s) > 0 {
		oldest = q.late.s[0].Enq // keyed by Enq: its head is its oldest
	}
	if q.order == FIFO {
		if len(q.main.s) > 0 {
			oldest = min(oldest, q.main.s[0].Enq)
		}
		return oldest, true
	}
	if len(q.main.s) == 0 {
		return oldest, true
	}
	if !q.enqs.off {
		if o, ok := q.enqs.oldest(); ok {
			return min(oldest, o), true
		}
	}
	for i := range q.main.s {
		oldest = min(oldest, q.main.s[i].Enq)
	}
	return oldest, true
}

// Ordered appends the queued requests to dst in run order and returns it:
// the main queue in the order Pop takes it, then the set-aside requests in
// the order they were set aside. That last order is the simulator's
// (policies were measured with it); it can differ from the order of Enq in
// which Pop runs them.
func (q *RunQueue[T]) Ordered(dst []Queued[T]) []Queued[T] {
	q.scratch = append(q.scratch[:0], q.main.s...)
	slices.SortFunc(q.scratch, cmpSlot[T])
	dst = appendQueued(dst, q.scratch)
	q.scratch = append(q.scratch[:0], q.late.s...)
	slices.SortFunc(q.scratch, cmpSeq[T])
	dst = appendQueued(dst, q.scratch)
	clear(q.scratch) // let a pointer T be collected once it leaves the queue
	return dst
}

// OrderedFirst appends the first k requests of Ordered's listing to dst,
// in the same order, and returns it. Its cost grows with k, not with the
// queue: O(k log k) for the main queue (a walk of the heap's top), plus
// O(L log k) over the L set-aside requests when the main queue holds fewer
// than k. A driver that shows a policy only the head of a long backlog
// uses it so that a tick costs the same whatever the backlog.
func (q *RunQueue[T]) OrderedFirst(dst []Queued[T], k int) []Queued[T] {
	switch {
	case k <= 0:
		return dst
	case k >= q.Len():
		return q.Ordered(dst)
	}
	if k >= len(q.main.s) {
		q.scratch = append(q.scratch[:0], q.main.s...)
		slices.SortFunc(q.scratch, cmpSlot[T])
		dst = appendQueued(dst, q.scratch)
		clear(q.scratch)
		return q.firstSetAside(dst, k-len(q.main.s))
	}
	// The k smallest of a binary heap: a frontier heap of indices, seeded
	// with the root; each index taken adds its two children.
	h := q.main.s
	less := func(a, b int32) bool { return h[a].before(&h[b]) }
	fr := append(q.idx[:0], 0)
	for range k {
		i := fr[0]
		dst = append(dst, Queued[T]{Entry: h[i].Entry, Value: h[i].v})
		fr = popIdx(fr, less)
		for _, c := range [2]int32{2*i + 1, 2*i + 2} {
			if int(c) < len(h) {
				fr = pushIdx(fr, c, less)
			}
		}
	}
	q.idx = fr[:0]
	return dst
}

// firstSetAside appends the first r set-aside requests in the order they
// were set aside (their push order into the late heap), r < L.
func (q *RunQueue[T]) firstSetAside(dst []Queued[T], r int) []Queued[T] {
	if r <= 0 {
		return dst
	}
	l := &q.aside
	for i := l.head; i < len(l.s) && r > 0; i++ {
		if !l.gone[i] {
			dst = append(dst, Queued[T]{Entry: l.s[i].Entry, Value: l.s[i].v})
			r--
		}
	}
	return dst
}

// asideLog holds the set-aside requests in the order they were set aside
// (their seq in the late heap, which counts up by one per push), with the
// ones that have left marked gone: listing the first r costs O(r) plus the
// gone ones among them, where a scan of the late heap cost O(L) per
// planning tick, the step that grew with an overloaded backlog.
type asideLog[T any] struct {
	s    []slot[T]
	gone []bool
	head int
	base uint64 // seq of s[0]
}

// add logs x, just pushed into the late heap.
func (l *asideLog[T]) add(x slot[T]) {
	if len(l.s) == 0 {
		l.base, l.head = x.seq, 0
	}
	l.s = append(l.s, x)
	l.gone = append(l.gone, false)
}

// remove marks the request with late-heap sequence seq gone.
func (l *asideLog[T]) remove(seq uint64) {
	l.gone[seq-l.base] = true
	for l.head < len(l.s) && l.gone[l.head] {
		l.s[l.head] = slot[T]{} // let a pointer T be collected
		l.head++
	}
	switch {
	case l.head == len(l.s):
		l.s, l.gone, l.head = l.s[:0], l.gone[:0], 0
	case l.head > 1024 && l.head > len(l.s)/2:
		n := copy(l.s, l.s[l.head:])
		copy(l.gone, l.gone[l.head:])
		clear(l.s[n:])
		l.s, l.gone = l.s[:n], l.gone[:n]
		l.base += uint64(l.head)
		l.head = 0
	}
}

// rebuild logs the slots of the late heap afresh (after RemoveFunc); last
// is the late heap's newest sequence, so that the next add lands at its
// own place even when the newest ones were removed.
func (l *asideLog[T]) rebuild(h []slot[T], last uint64) {
	sorted := append([]slot[T](nil), h...)
	slices.SortFunc(sorted, cmpSeq[T])
	clear(l.s)
	l.s, l.gone, l.head = l.s[:0], l.gone[:0], 0
	if len(sorted) == 0 {
		return
	}
	l.base = sorted[0].seq
	for _, x := range sorted {
		for uint64(len(l.s)) < x.seq-l.base {
			l.s = append(l.s, slot[T]{})
			l.gone = append(l.gone, true)
		}
		l.s = append(l.s, x)
		l.gone = append(l.gone, false)
	}
	for uint64(len(l.s)) < last-l.base+1 {
		l.s = append(l.s, slot[T]{})
		l.gone = append(l.gone, true)
	}
}

// pushIdx, popIdx and downIdx keep a binary heap of indices under less.
func pushIdx(s []int32, x int32, less func(a, b int32) bool) []int32 {
	s = append(s, x)
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !less(s[i], s[p]) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
	return s
}

func popIdx(s []int32, less func(a, b int32) bool) []int32 {
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	if last > 0 {
		downIdx(s, 0, less)
	}
	return s
}

func downIdx(s []int32, i int, less func(a, b int32) bool) {
	for {
		c := 2*i + 1
		if c >= len(s) {
			return
		}
		if r := c + 1; r < len(s) && less(s[r], s[c]) {
			c = r
		}
		if !less(s[c], s[i]) {
			return
		}
		s[i], s[c] = s[c], s[i]
		i = c
	}
}

func appendQueued[T any](dst []Queued[T], s []slot[T]) []Queued[T] {
	for i := range s {
		dst = append(dst, Queued[T]{Entry: s[i].Entry, Value: s[i].v})
	}
	return dst
}

func cmpSlot[T any](a, b slot[T]) int {
	if c := cmp.Compare(a.key, b.key); c != 0 {
		return c
	}
	return cmpSeq(a, b)
}

func cmpSeq[T any](a, b slot[T]) int { return cmp.Compare(a.seq, b.seq) }

// RemoveFunc removes every queued request for which drop returns true and
// returns how many. It calls drop once per queued request and costs O(n);
// the gateway uses it when a client cancels.
func (q *RunQueue[T]) RemoveFunc(drop func(T) bool) int {
	n := q.main.removeFunc(drop)
	if n > 0 {
		// Which pushes left is not known here; scan until empty.
		q.enqs.off = true
	}
	if m := q.late.removeFunc(drop); m > 0 {
		q.aside.rebuild(q.late.s, q.late.seq)
		n += m
	}
	return n
}

// slot is one queued request inside a heap.
type slot[T any] struct {
	key int64
	seq uint64 // push order into this heap; unique, so the order is total
	Entry
	v T
}

func (a *slot[T]) before(b *slot[T]) bool {
	return a.key < b.key || (a.key == b.key && a.seq < b.seq)
}

// runHeap is a binary min-heap of slots by (key, seq). Sifts move a hole
// rather than swapping, which halves the copies of the wide slots.
type runHeap[T any] struct {
	s   []slot[T]
	seq uint64
}

func (h *runHeap[T]) push(key int64, e Entry, v T) {
	h.seq++
	x := slot[T]{key: key, seq: h.seq, Entry: e, v: v}
	h.s = append(h.s, x)
	h.up(len(h.s)-1, x)
}

func (h *runHeap[T]) pop() slot[T] {
	top := h.s[0]
	last := len(h.s) - 1
	x := h.s[last]
	h.s[last] = slot[T]{} // let a pointer T be collected
	h.s = h.s[:last]
	if last > 0 {
		h.down(0, x)
	}
	return top
}

// up places x, whose place is the hole at i, towards the root.
func (h *runHeap[T]) up(i int, x slot[T]) {
	for i > 0 {
		p := (i - 1) / 2
		if !x.before(&h.s[p]) {
			break
		}
		h.s[i] = h.s[p]
		i = p
	}
	h.s[i] = x
}

// down places x, whose place is the hole at i, towards the leaves.
func (h *runHeap[T]) down(i int, x slot[T]) {
	n := len(h.s)
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && h.s[r].before(&h.s[c]) {
			c = r
		}
		if !h.s[c].before(&x) {
			break
		}
		h.s[i] = h.s[c]
		i = c
	}
	h.s[i] = x
}

func (h *runHeap[T]) removeFunc(drop func(T) bool) int {
	kept := h.s[:0]
	for _, s := range h.s {
		if !drop(s.v) {
			kept = append(kept, s)
		}
	}
	n := len(h.s) - len(kept)
	if n == 0 {
		return 0
	}
	clear(h.s[len(kept):])
	h.s = kept
	// Pop order depends only on the (key, seq) total order, not on the
	// heap's layout, so rebuilding the heap changes no run order.
	for i := len(h.s)/2 - 1; i >= 0; i-- {
		h.down(i, h.s[i])
	}
	return n
}
