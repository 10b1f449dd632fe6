package rtqueue

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
)

// errHandlerPanic marks a handler panic turned into an error: the item is
// retried like any failure instead of taking the controller down.
var errHandlerPanic = errors.New("rtqueue: handler panicked")

// work is one worker's life. The goroutine locks its OS thread and never
// unlocks it: the thread's scheduling attributes are changed, and a Go
// thread that exits while locked is destroyed rather than returned to the
// runtime's pool, so no other goroutine ever inherits SCHED_FIFO.
func (p *Pool[T]) work(ctx context.Context, reserve bool) {
	defer p.exited()
	runtime.LockOSThread()
	w := &thread{tid: p.cfg.Scheduler.Tid(), reserve: reserve, floor: MinPriority}
	if reserve {
		w.floor = p.cfg.ReserveFloor
	}
	w.cur = p.enter(w.tid, reserve)
	park := newParker()
	for {
		item, priority, shutdown := p.q.getAtLeast(w.floor, park)
		if shutdown {
			p.leave(reserve)
			return
		}
		p.serve(ctx, w, item, priority)
		if p.becomeIdle(reserve) {
			return
		}
	}
}

// thread is one worker's OS thread and what it is currently set to.
type thread struct {
	tid     int
	cur     SchedParams
	reserve bool
	floor   int
}

// serve runs one item at its mapped priority.
func (p *Pool[T]) serve(ctx context.Context, w *thread, item T, priority int) {
	p.becomeBusy(ctx, w.reserve)
	w.cur = p.apply(w.tid, w.cur, p.busyParams(priority, w.reserve))
	err := p.safeHandle(ctx, item)
	// Back at the idle priority before touching the queue's lock: a worker
	// then never holds that lock at a background priority, where the
	// kernel could preempt it for long and stall a critical worker behind
	// it (Go's mutex has no priority inheritance).
	w.cur = p.apply(w.tid, w.cur, p.idleParams(w.reserve))
	p.settle(item, err)
}

func (p *Pool[T]) exited() {
	if p.live.Add(-1) == 0 {
		close(p.allGone)
	}
	p.wg.Done()
}

// enter sets the thread's starting parameters. Without real time each
// worker gets one fixed nice value for life, because an unprivileged
// thread may raise its nice value but never lower it again.
func (p *Pool[T]) enter(tid int, reserve bool) SchedParams {
	return p.apply(tid, unknownParams, p.idleParams(reserve))
}

// unknownParams stands for a thread's inherited, unknown parameters; it
// equals nothing the pool sets, so the first apply always calls the kernel.
var unknownParams = SchedParams{Policy: -1}

func (p *Pool[T]) idleParams(reserve bool) SchedParams {
	if p.realTime() {
		return p.cfg.Mapping.Idle()
	}
	return p.fallbackParams(reserve)
}

func (p *Pool[T]) busyParams(priority int, reserve bool) SchedParams {
	if p.realTime() {
		return p.cfg.Mapping.Busy(priority)
	}
	return p.fallbackParams(reserve)
}

func (p *Pool[T]) realTime() bool { return p.cfg.RealTime && !p.fallback.Load() }

// fallbackParams: reserve workers keep nice 0 and general workers take the
// mapping's nice for background work, so critical items (which reserve
// workers prefer) still outrank the bulk under the fair scheduler.
func (p *Pool[T]) fallbackParams(reserve bool) SchedParams {
	if reserve {
		return SchedParams{Policy: PolicyOther}
	}
	bg := p.cfg.Mapping.Busy(MinPriority)
	if bg.Policy != PolicyOther {
		return SchedParams{Policy: PolicyOther}
	}
	return bg
}

// apply changes the thread's parameters if they differ. A refused
// SCHED_FIFO switches the whole pool to the fallback once; any other
// failure leaves the thread as it is, which costs latency but never work.
func (p *Pool[T]) apply(tid int, cur, want SchedParams) SchedParams {
	if want == cur {
		return cur
	}
	err := p.cfg.Scheduler.Set(tid, want)
	if err == nil {
		return want
	}
	if want.Policy == PolicyFIFO {
		p.fallBack(err)
		// nice 0 is safe for either class; the caller's next transition
		// applies the class's own fallback value.
		return p.apply(tid, cur, SchedParams{Policy: PolicyOther})
	}
	p.log.Debug("rtqueue: could not set thread scheduling", "params", want.String(), "err", err)
	return cur
}

func (p *Pool[T]) fallBack(err error) {
	p.fallbackOnce.Do(func() {
		p.fallback.Store(true)
		p.metrics.setPolicy(PolicyOther)
		p.log.Warn("rtqueue: SCHED_FIFO unavailable, workers fall back to SCHED_OTHER with nice values",
			"queue", p.q.name, "err", err)
	})
}

// settle tells the queue how the handler did, the way client-go
// controllers do: retry with backoff on error, forget on success, Done
// always.
func (p *Pool[T]) settle(item T, err error) {
	defer p.q.Done(item)
	if err != nil {
		p.retry(item, err)
		return
	}
	p.q.Forget(item)
}

func (p *Pool[T]) safeHandle(ctx context.Context, item T) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", errHandlerPanic, r)
			// A retried error is routine; a panic is a bug, and its stack is
			// the only way to find it.
			p.log.Error("rtqueue: handler panicked; item retried with backoff", "queue", p.q.name,
				"item", fmt.Sprint(item), "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
		}
	}()
	return p.handle(ctx, item)
}

func (p *Pool[T]) retry(item T, err error) {
	if p.q.ShuttingDown() {
		p.log.Warn("rtqueue: handler failed during shutdown; item not retried", "queue", p.q.name,
			"item", fmt.Sprint(item), "err", err)
		return
	}
	p.log.Debug("rtqueue: handler failed; retrying with backoff", "queue", p.q.name,
		"item", fmt.Sprint(item), "err", err)
	p.q.AddRateLimited(item)
}

// becomeBusy moves this worker to busy and grows the pool if too few
// general workers are left idle.
func (p *Pool[T]) becomeBusy(ctx context.Context, reserve bool) {
	if reserve {
		p.resIdl.Add(-1)
		p.resBsy.Add(1)
		p.publishReserve()
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.counts.idle--
	p.counts.busy++
	for shouldGrow(p.counts, p.cfg) && !p.q.ShuttingDown() {
		p.lockedSpawn(ctx, false)
	}
	p.lockedPublish()
}

// becomeIdle moves this worker back to idle, or retires it (returning
// true) if the watchdog finds too many general workers idle.
func (p *Pool[T]) becomeIdle(reserve bool) bool {
	if reserve {
		p.resBsy.Add(-1)
		p.resIdl.Add(1)
		p.publishReserve()
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.lockedPublish()
	p.counts.busy--
	p.counts.idle++
	if shouldRetire(p.counts, p.cfg) {
		p.counts.idle--
		return true
	}
	return false
}

func (p *Pool[T]) leave(reserve bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if reserve {
		p.resIdl.Add(-1)
		p.counts.reserve--
	} else {
		p.counts.idle--
	}
	p.lockedPublish()
}
