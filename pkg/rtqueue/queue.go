package rtqueue

import (
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// Config configures a Queue. The zero value is usable.
type Config[T comparable] struct {
	// Name labels the metrics.
	Name string
	// Clock is injectable so tests can step time; nil means the real clock.
	Clock clock.WithTicker
	// RateLimiter serves AddRateLimited; nil means client-go's default
	// controller rate limiter (per-item 5ms..1000s backoff, 10 qps burst 100).
	RateLimiter workqueue.TypedRateLimiter[T]
	// Aging, when > 0, raises a waiting item's effective priority by one
	// level per Aging period, so an item of priority p is ahead of every item
	// enqueued more than (99-p)*Aging after it. See docs/engine.md.
	Aging time.Duration
	// Registerer receives the metrics; nil means they are not registered.
	Registerer prometheus.Registerer
}

// inflight is an item handed to a worker and not yet Done.
type inflight[T comparable] struct {
	priority int
	started  time.Time
	redo     *entry[T] // re-added while processing; queued again on Done
}

// waiter is a Get call parked until an item it may take arrives.
type waiter struct {
	floor int
	p     parker
}

// Queue is a deduplicating multi-priority work queue. It implements
// workqueue.TypedRateLimitingInterface[T]; higher priorities are handed out
// first, FIFO within one priority.
type Queue[T comparable] struct {
	name    string
	clock   clock.WithTicker
	limiter workqueue.TypedRateLimiter[T]
	aging   time.Duration
	metrics *queueMetrics
	// metricsRegisterer is kept for the pool's metrics.
	metricsRegisterer prometheus.Registerer

	// mu guards every field below, the delay heap included.
	mu      sync.Mutex
	waiting levels[T]
	queued  map[T]*entry[T]
	active  map[T]*inflight[T]
	// lastPrio holds the priority of every key the queue holds (waiting,
	// delayed or in flight); lockedRelease drops it when the key leaves, so
	// churn through many keys does not grow it.
	lastPrio map[T]int
	seq      uint64
	delayed  delayHeap[T]
	// waiters are the parked Gets that have not been woken, highest floor
	// first and, among equal floors, the most recently parked first. woken
	// are Gets sent a wake-up that have not yet taken the lock again, also
	// highest floor first. lockedWake keeps them so that no item waits
	// while a parked Get may take it and no woken one is on its way to it.
	waiters  []*waiter
	woken    []*waiter
	shutting bool
	drain    bool
	drainCnd *sync.Cond

	kick     chan struct{}
	stop     chan struct{}
	stopOnce sync.Once
	loopDone chan struct{}
}

var _ workqueue.TypedRateLimitingInterface[string] = (*Queue[string])(nil)

// New returns a running queue; call ShutDown or ShutDownWithDrain to stop
// its delay goroutine.
func New[T comparable](cfg Config[T]) *Queue[T] {
	q := &Queue[T]{
		name:              cfg.Name,
		clock:             cfg.Clock,
		limiter:           cfg.RateLimiter,
		aging:             cfg.Aging,
		metrics:           newQueueMetrics(cfg.Name, cfg.Registerer),
		metricsRegisterer: cfg.Registerer,
		queued:            map[T]*entry[T]{},
		active:            map[T]*inflight[T]{},
		lastPrio:          map[T]int{},
		delayed:           newDelayHeap[T](),
		kick:              make(chan struct{}, 1),
		stop:              make(chan struct{}),
		loopDone:          make(chan struct{}),
	}
	if q.clock == nil {
		q.clock = clock.RealClock{}
	}
	if q.limiter == nil {
		q.limiter = workqueue.DefaultTypedControllerRateLimiter[T]()
	}
	q.drainCnd = sync.NewCond(&q.mu)
	go q.delayLoop()
	return q
}

// Add queues item at the priority last given to AddWithPriority while the
// queue held it (waiting, delayed or in flight), or 0 for a key it does not
// hold.
func (q *Queue[T]) Add(item T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.lockedRefuse() {
		return
	}
	q.lockedAdd(item, q.lastPrio[item], q.clock.Now())
}

// AddWithPriority queues item at priority (clamped to 0..99) and remembers
// the priority for later plain adds. A queued item only ever moves up.
func (q *Queue[T]) AddWithPriority(item T, priority int) {
	priority = clampPriority(priority)
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.lockedRefuse() {
		return
	}
	q.lastPrio[item] = priority
	q.lockedAdd(item, priority, q.clock.Now())
}

// ForgetPriority drops the remembered priority of item, for keys that will
// not come back (a deleted object); it does not touch a queued item.
func (q *Queue[T]) ForgetPriority(item T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.lastPrio, item)
}

// lockedRefuse reports (and counts) adds after shutdown, which client-go
// semantics ignore.
func (q *Queue[T]) lockedRefuse() bool {
	if q.shutting {
		q.metrics.ignored.Inc()
	}
	return q.shutting
}

func (q *Queue[T]) lockedAdd(item T, priority int, now time.Time) {
	if a, ok := q.active[item]; ok {
		q.lockedMarkRedo(a, item, priority, now)
		return
	}
	if e, ok := q.queued[item]; ok {
		if priority > e.priority {
			q.lockedMove(e, priority, now)
		}
		return
	}
	e := &entry[T]{item: item, priority: priority, enqueued: now}
	q.queued[item] = e
	q.metrics.adds[bandOf(priority)].Inc()
	q.lockedPush(e, now)
}

// lockedMarkRedo records an add that arrived while the item is processing:
// it runs again after Done, at the higher priority of the two.
func (q *Queue[T]) lockedMarkRedo(a *inflight[T], item T, priority int, now time.Time) {
	if a.redo == nil {
		a.redo = &entry[T]{item: item, priority: priority, enqueued: now}
		return
	}
	a.redo.priority = max(a.redo.priority, priority)
}

func (q *Queue[T]) lockedMove(e *entry[T], priority int, now time.Time) {
	q.waiting.remove(e)
	q.metrics.depth[bandOf(e.priority)].Dec()
	e.priority = priority
	q.lockedPush(e, now)
}

func (q *Queue[T]) lockedPush(e *entry[T], now time.Time) {
	q.seq++
	e.seq, e.levelAt = q.seq, now
	q.waiting.push(e)
	q.metrics.depth[bandOf(e.priority)].Inc()
	q.lockedWake()
}

// lockedWake wakes the parked Gets that waiting items need. A woken Get
// takes the highest item its floor admits, not necessarily the one whose
// push woke it, so waking one Get per push loses wake-ups: a general worker
// can take the critical item whose push woke a reserve worker, the reserve
// worker finds nothing and parks again, and the low item that woke the
// general worker waits while another general worker stays parked.
//
// Instead every change to the waiting items or the woken set calls this,
// and it matches items to Gets as a maximum matching: each Get (woken or
// parked) in order of floor, highest first, claims the highest unclaimed
// item its floor admits. The admitted sets are nested (a lower floor admits
// everything a higher one does), so serving the most restricted Get first
// claims as many items as any assignment can. Parked Gets that claim an
// item are woken. A woken Get goes before a parked one of the same floor,
// so an item already covered wakes nobody else; a parked reserve worker
// still goes before a woken general one, so a critical item goes to the
// reserve. It costs one pass over the Gets, and stops when the items run
// out.
func (q *Queue[T]) lockedWake() {
	if len(q.waiters) == 0 {
		return
	}
	var buf [8]*waiter
	for _, w := range q.lockedChoose(buf[:0]) {
		q.woken = insertByFloor(q.woken, w)
		w.p.unpark()
	}
}

// lockedChoose runs the matching, removes the parked Gets that claimed an
// item from waiters, and appends them to wake.
func (q *Queue[T]) lockedChoose(wake []*waiter) []*waiter {
	next := q.waiting.cursor()
	kept := q.waiters[:0]
	wi := 0
	for i, w := range q.waiters {
		for wi < len(q.woken) && q.woken[wi].floor >= w.floor {
			next.claim(q.woken[wi].floor)
			wi++
		}
		if !next.more() {
			kept = append(kept, q.waiters[i:]...)
			break
		}
		if next.claim(w.floor) {
			wake = append(wake, w)
		} else {
			kept = append(kept, w)
		}
	}
	clear(q.waiters[len(kept):])
	q.waiters = kept
	return wake
}

// insertByFloor keeps ws highest floor first; a newcomer goes before the
// others of its floor, so the most recently parked worker, whose cache and
// thread are warmest, is woken first.
func insertByFloor(ws []*waiter, w *waiter) []*waiter {
	i := 0
	for i < len(ws) && ws[i].floor > w.floor {
		i++
	}
	return slices.Insert(ws, i, w)
}

// lockedArrive notes that a woken Get has taken the lock again.
func (q *Queue[T]) lockedArrive(w *waiter) {
	if i := slices.Index(q.woken, w); i >= 0 {
		q.woken = slices.Delete(q.woken, i, i+1)
	}
}

func (q *Queue[T]) lockedWakeAll() {
	for _, w := range q.waiters {
		q.woken = insertByFloor(q.woken, w)
		w.p.unpark()
	}
	clear(q.waiters)
	q.waiters = q.waiters[:0]
}

// Len is the number of items waiting to be handed out (delayed items and
// items being processed are not counted).
func (q *Queue[T]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.waiting.size
}

// Get blocks until an item is ready and returns it; shutdown is true once
// the queue is shut down and empty. Call Done with the item afterwards.
func (q *Queue[T]) Get() (item T, shutdown bool) {
	item, _, shutdown = q.GetWithPriority()
	return item, shutdown
}

// GetWithPriority is Get that also returns the item's priority.
func (q *Queue[T]) GetWithPriority() (item T, priority int, shutdown bool) {
	return q.getAtLeast(MinPriority, newParker())
}

// getAtLeast is Get for a worker that only takes items of priority >=
// floor (the reserve workers use it), parking on p when there is none.
func (q *Queue[T]) getAtLeast(floor int, p parker) (item T, priority int, shutdown bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var w *waiter
	for {
		now := q.clock.Now()
		if e := q.waiting.pick(floor, q.aging, now); e != nil {
			q.lockedHandOut(e, now)
			// The item taken may be the one another woken Get was sent for;
			// pass the wake-up on to whoever the remaining items need.
			q.lockedWake()
			return e.item, e.priority, false
		}
		if q.shutting {
			var zero T
			return zero, 0, true
		}
		// Parking again needs no lockedWake: finding nothing means no
		// waiting item is one this Get could have claimed, so its leaving
		// the woken set changes no other Get's claim.
		if w == nil {
			w = &waiter{floor: floor, p: p}
		}
		q.waiters = insertByFloor(q.waiters, w)
		q.mu.Unlock()
		p.park()
		q.mu.Lock()
		q.lockedArrive(w)
	}
}

// lockedHandOut moves e from waiting to active.
func (q *Queue[T]) lockedHandOut(e *entry[T], now time.Time) {
	q.waiting.remove(e)
	delete(q.queued, e.item)
	b := bandOf(e.priority)
	q.metrics.depth[b].Dec()
	q.metrics.wait[b].Observe(now.Sub(e.enqueued).Seconds())
	q.active[e.item] = &inflight[T]{priority: e.priority, started: now}
}

// Done marks item finished. If it was added again while processing, it is
// queued again now, at the higher of the two priorities.
func (q *Queue[T]) Done(item T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	a, ok := q.active[item]
	if !ok {
		return
	}
	delete(q.active, item)
	now := q.clock.Now()
	q.metrics.work[bandOf(a.priority)].Observe(now.Sub(a.started).Seconds())
	if e := a.redo; e != nil {
		e.priority = max(e.priority, a.priority)
		q.queued[item] = e
		q.lockedPush(e, now)
	} else {
		q.lockedRelease(item)
	}
	q.lockedSignalDrained()
}

// lockedRelease forgets the priority of an item that has left the queue,
// unless a delayed add still holds it: a controller that never hears of a
// deleted key again must not leave one entry per key ever seen.
func (q *Queue[T]) lockedRelease(item T) {
	if _, delayed := q.delayed.byItem[item]; !delayed {
		delete(q.lastPrio, item)
	}
}

func (q *Queue[T]) lockedSignalDrained() {
	if q.drain && q.waiting.size == 0 && len(q.active) == 0 {
		q.drainCnd.Broadcast()
	}
}

// ShutDown stops accepting adds, drops delayed items, and makes Get return
// shutdown once the queued items are handed out.
func (q *Queue[T]) ShutDown() {
	q.mu.Lock()
	q.shutting, q.drain = true, false
	q.lockedWakeAll()
	q.drainCnd.Broadcast()
	q.mu.Unlock()
	q.stopDelayLoop()
}

// ShutDownWithDrain is ShutDown that also waits until every queued and
// in-flight item is Done. A later ShutDown stops the wait.
func (q *Queue[T]) ShutDownWithDrain() {
	q.mu.Lock()
	q.shutting, q.drain = true, true
	q.lockedWakeAll()
	for q.drain && (q.waiting.size > 0 || len(q.active) > 0) {
		q.drainCnd.Wait()
	}
	q.mu.Unlock()
	q.stopDelayLoop()
}

// ShuttingDown reports whether a shutdown has begun.
func (q *Queue[T]) ShuttingDown() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.shutting
}

// AddRateLimited adds item after the rate limiter's delay for it.
func (q *Queue[T]) AddRateLimited(item T) {
	q.AddAfter(item, q.limiter.When(item))
}

// Forget clears the rate limiter's memory of item; call Done as well.
func (q *Queue[T]) Forget(item T) { q.limiter.Forget(item) }

// NumRequeues is how often the rate limiter has delayed item.
func (q *Queue[T]) NumRequeues(item T) int { return q.limiter.NumRequeues(item) }
