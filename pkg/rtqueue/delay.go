package rtqueue

import (
	"container/heap"
	"time"
)

// delayed is an item waiting for its ready time. A key has at most one
// delayed entry: the earliest ready time and the highest priority win.
type delayed[T comparable] struct {
	item     T
	priority int
	readyAt  time.Time
	index    int
}

// delayHeap orders delayed items by ready time; byItem makes re-adds O(log n).
type delayHeap[T comparable] struct {
	items  []*delayed[T]
	byItem map[T]*delayed[T]
}

func newDelayHeap[T comparable]() delayHeap[T] {
	return delayHeap[T]{byItem: map[T]*delayed[T]{}}
}

func (h *delayHeap[T]) Len() int           { return len(h.items) }
func (h *delayHeap[T]) Less(i, j int) bool { return h.items[i].readyAt.Before(h.items[j].readyAt) }
func (h *delayHeap[T]) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].index, h.items[j].index = i, j
}
func (h *delayHeap[T]) Push(x any) {
	d := x.(*delayed[T])
	d.index = len(h.items)
	h.items = append(h.items, d)
}
func (h *delayHeap[T]) Pop() any {
	n := len(h.items) - 1
	d := h.items[n]
	h.items[n] = nil
	h.items = h.items[:n]
	return d
}

func (h *delayHeap[T]) insert(item T, priority int, readyAt time.Time) {
	if d, ok := h.byItem[item]; ok {
		d.priority = max(d.priority, priority)
		if readyAt.Before(d.readyAt) {
			d.readyAt = readyAt
			heap.Fix(h, d.index)
		}
		return
	}
	d := &delayed[T]{item: item, priority: priority, readyAt: readyAt}
	h.byItem[item] = d
	heap.Push(h, d)
}

// popReady removes and returns the earliest item if it is ready at now.
func (h *delayHeap[T]) popReady(now time.Time) (*delayed[T], bool) {
	if len(h.items) == 0 || h.items[0].readyAt.After(now) {
		return nil, false
	}
	d := heap.Pop(h).(*delayed[T])
	delete(h.byItem, d.item)
	return d, true
}

func (h *delayHeap[T]) next() (time.Time, bool) {
	if len(h.items) == 0 {
		return time.Time{}, false
	}
	return h.items[0].readyAt, true
}

// AddAfter adds item once duration has passed, at its last known priority.
func (q *Queue[T]) AddAfter(item T, duration time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.lockedRefuse() {
		return
	}
	q.metrics.retries.Inc()
	now := q.clock.Now()
	if duration <= 0 {
		q.lockedAdd(item, q.lastPrio[item], now)
		return
	}
	q.delayed.insert(item, q.lastPrio[item], now.Add(duration))
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

// delayLoop moves delayed items into the queue when they become ready. It
// sleeps on a clock timer so a fake clock drives it in tests.
func (q *Queue[T]) delayLoop() {
	defer close(q.loopDone)
	for {
		next, ok := q.releaseReady()
		var fire <-chan time.Time
		var timer interface{ Stop() bool }
		if ok {
			t := q.clock.NewTimer(next)
			fire, timer = t.C(), t
		}
		select {
		case <-q.stop:
			stopTimer(timer)
			return
		case <-q.kick:
		case <-fire:
		}
		stopTimer(timer)
	}
}

func stopTimer(t interface{ Stop() bool }) {
	if t != nil {
		t.Stop()
	}
}

// releaseReady queues every ready delayed item and returns how long until
// the next one is ready.
func (q *Queue[T]) releaseReady() (time.Duration, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.clock.Now()
	for {
		d, ok := q.delayed.popReady(now)
		if !ok {
			break
		}
		if !q.shutting {
			q.lockedAdd(d.item, d.priority, now)
		}
	}
	at, ok := q.delayed.next()
	return at.Sub(now), ok
}

func (q *Queue[T]) stopDelayLoop() {
	q.stopOnce.Do(func() { close(q.stop) })
	<-q.loopDone
}
