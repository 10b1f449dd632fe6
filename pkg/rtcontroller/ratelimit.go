package rtcontroller

import (
	"container/heap"
	"context"
	"errors"
	"sync"
	"time"

	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"
)

// ErrLimiterStopped is returned to requests waiting when the limiter stops.
var ErrLimiterStopped = errors.New("priority rate limiter stopped")

type priorityCtxKey struct{}

// WithPriority tags a context with the criticality of the object a request
// is for. A PriorityLimiter serves the highest tagged priority first.
func WithPriority(ctx context.Context, priority int) context.Context {
	return context.WithValue(ctx, priorityCtxKey{}, priority)
}

// PriorityFrom returns the priority WithPriority attached, or -1 for
// untagged requests, which therefore yield to every tagged one.
func PriorityFrom(ctx context.Context) int {
	if p, ok := ctx.Value(priorityCtxKey{}).(int); ok {
		return p
	}
	return -1
}

// PriorityLimiter is a token bucket for a REST client whose waiting requests
// are served in priority order (FIFO within a priority) instead of arrival
// order. With client-go's default bucket, one critical pod create waits
// behind every queued low-criticality request; here it waits at most for the
// next token.
type PriorityLimiter struct {
	clock    clock.Clock
	qps      float32
	interval time.Duration // refill time of one token
	capacity time.Duration // burst tokens, in refill time
	stop     chan struct{}

	mu sync.Mutex // guards every field below
	// credit is the bucket's fill at time last, counted in refill time so
	// the arithmetic is exact: a request needs one interval of credit.
	credit  time.Duration
	last    time.Time
	waiters waiterHeap
	seq     uint64
	armed   bool // a refill timer is pending
	stopped bool

	// The critical reserve (WithCriticalReserve): a second bucket that
	// only requests at priority >= resFloor draw on, when the shared one
	// is empty. resInterval 0 means none.
	resFloor    int
	resInterval time.Duration
	resCapacity time.Duration
	resCredit   time.Duration
}

var _ flowcontrol.RateLimiter = (*PriorityLimiter)(nil)

// NewPriorityLimiter returns a full bucket of burst tokens refilled at qps.
// A nil clock means the real clock.
func NewPriorityLimiter(qps float32, burst int, c clock.Clock) *PriorityLimiter {
	if c == nil {
		c = clock.RealClock{}
	}
	if qps <= 0 {
		qps = 1
	}
	interval := max(time.Duration(float64(time.Second)/float64(qps)), 1)
	capacity := time.Duration(max(burst, 1)) * interval
	return &PriorityLimiter{
		clock: c, qps: qps, interval: interval, capacity: capacity,
		credit: capacity, last: c.Now(), stop: make(chan struct{}),
	}
}

// WithCriticalReserve gives requests at priority floor and above a bucket
// of their own, qps refilled and burst deep, which they draw on when the
// shared bucket is empty. Without it a critical request waits at most for
// the next shared token, but under churn that saturates the client every
// token is taken as it comes, so each critical request still waits about
// 1/qps, and several in a row wait in turn; with it they go at once while
// the reserve lasts. The reserve adds at most qps to what the client sends
// the apiserver. Call it before the limiter is used.
func (l *PriorityLimiter) WithCriticalReserve(floor int, qps float32, burst int) *PriorityLimiter {
	if qps <= 0 {
		return l
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.resFloor = floor
	l.resInterval = max(time.Duration(float64(time.Second)/float64(qps)), 1)
	l.resCapacity = time.Duration(max(burst, 1)) * l.resInterval
	l.resCredit = l.resCapacity
	return l
}

// reserveForLocked reports whether a request at priority p may take a
// reserve token now.
func (l *PriorityLimiter) reserveForLocked(p int) bool {
	return l.resInterval > 0 && p >= l.resFloor && l.resCredit >= l.resInterval
}

type waiter struct {
	priority int
	seq      uint64
	index    int // position in the heap, -1 once granted or removed
	granted  chan struct{}
	err      error
}

// Wait blocks until the request may go or ctx ends.
func (l *PriorityLimiter) Wait(ctx context.Context) error {
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return ErrLimiterStopped
	}
	l.refillLocked()
	if len(l.waiters) == 0 && l.credit >= l.interval {
		l.credit -= l.interval
		l.mu.Unlock()
		return nil
	}
	prio := PriorityFrom(ctx)
	if l.reserveForLocked(prio) && (len(l.waiters) == 0 || l.waiters[0].priority < prio) {
		// No waiting request outranks this one: it may use the reserve.
		l.resCredit -= l.resInterval
		l.mu.Unlock()
		return nil
	}
	w := &waiter{priority: prio, seq: l.seq, granted: make(chan struct{})}
	l.seq++
	heap.Push(&l.waiters, w)
	l.armLocked()
	l.mu.Unlock()

	select {
	case <-w.granted:
		return w.err
	case <-ctx.Done():
		l.abandon(w)
		return ctx.Err()
	}
}

// abandon withdraws a waiter whose context ended; a token granted in the
// meantime goes back into the bucket.
func (l *PriorityLimiter) abandon(w *waiter) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if w.index >= 0 {
		heap.Remove(&l.waiters, w.index)
		return
	}
	if w.err == nil {
		l.credit = min(l.capacity, l.credit+l.interval)
	}
}

// Accept blocks until a token is available.
func (l *PriorityLimiter) Accept() { _ = l.Wait(context.Background()) }

// TryAccept takes a token if one is free and nobody is waiting for it.
func (l *PriorityLimiter) TryAccept() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refillLocked()
	if l.stopped || len(l.waiters) > 0 || l.credit < l.interval {
		return false
	}
	l.credit -= l.interval
	return true
}

// QPS returns the refill rate.
func (l *PriorityLimiter) QPS() float32 { return l.qps }

// Stop fails every waiting request and every later one.
func (l *PriorityLimiter) Stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return
	}
	l.stopped = true
	close(l.stop)
	for len(l.waiters) > 0 {
		w := heap.Pop(&l.waiters).(*waiter)
		w.err = ErrLimiterStopped
		close(w.granted)
	}
}

// waiting reports how many requests are queued; tests use it to know their
// requests are in line before moving the clock.
func (l *PriorityLimiter) waiting() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.waiters)
}

// refillLocked accrues credit for the time since last. The burst cap applies
// only while nobody waits: time that passed while requests were queued is
// owed to them, so a late timer does not lower the rate below qps.
func (l *PriorityLimiter) refillLocked() {
	now := l.clock.Now()
	elapsed := max(now.Sub(l.last), 0)
	l.credit += elapsed
	l.last = now
	l.capLocked()
	if l.resInterval > 0 {
		l.resCredit = min(l.resCapacity, l.resCredit+elapsed)
	}
}

func (l *PriorityLimiter) capLocked() {
	if len(l.waiters) == 0 {
		l.credit = min(l.capacity, l.credit)
	}
}

// armLocked starts one timer for the moment the next token is due.
func (l *PriorityLimiter) armLocked() {
	if l.armed || len(l.waiters) == 0 {
		return
	}
	l.armed = true
	delay := max(l.interval-l.credit, 0)
	if l.resInterval > 0 && l.waiters[0].priority >= l.resFloor {
		delay = min(delay, max(l.resInterval-l.resCredit, 0))
	}
	t := l.clock.NewTimer(delay)
	go func() {
		select {
		case <-t.C():
			l.dispatch()
		case <-l.stop:
			t.Stop()
		}
	}()
}

// dispatch hands the tokens that have accrued to the highest-priority waiters.
func (l *PriorityLimiter) dispatch() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.armed = false
	if l.stopped {
		return
	}
	l.refillLocked()
	for len(l.waiters) > 0 {
		// A critical waiter takes a reserve token first, so the shared one
		// is left for the next waiter.
		switch {
		case l.reserveForLocked(l.waiters[0].priority):
			l.resCredit -= l.resInterval
		case l.credit >= l.interval:
			l.credit -= l.interval
		default:
			l.capLocked()
			l.armLocked()
			return
		}
		close(heap.Pop(&l.waiters).(*waiter).granted)
	}
	l.capLocked()
	l.armLocked()
}

// waiterHeap orders by priority (highest first), then arrival.
type waiterHeap []*waiter

func (h waiterHeap) Len() int { return len(h) }
func (h waiterHeap) Less(i, j int) bool {
	if h[i].priority != h[j].priority {
		return h[i].priority > h[j].priority
	}
	return h[i].seq < h[j].seq
}
func (h waiterHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *waiterHeap) Push(x any) {
	w := x.(*waiter)
	w.index = len(*h)
	*h = append(*h, w)
}
func (h *waiterHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = nil
	w.index = -1
	*h = old[:len(old)-1]
	return w
}
