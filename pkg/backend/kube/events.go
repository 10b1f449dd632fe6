package kube

import (
	"sync"

	"gantry.dev/gantry/pkg/backend"
)

// eventQueue delivers events on one goroutine of its own, in the order they
// were pushed. Pushing never blocks and takes only the queue's own lock, so
// the backend can push while holding its lock (which keeps the order of
// its decisions), and the dispatcher's handlers, which take the
// dispatcher's lock and may call back into the backend, never run under
// it.
type eventQueue struct {
	mu      sync.Mutex // guards the fields below
	ev      backend.Events
	items   []event
	closing bool

	wake chan struct{} // capacity 1: a pending wake-up
	done chan struct{} // closed when the last event is delivered after close
}

func newEventQueue() *eventQueue {
	q := &eventQueue{wake: make(chan struct{}, 1), done: make(chan struct{})}
	go q.run()
	return q
}

func (q *eventQueue) attach(ev backend.Events) {
	q.mu.Lock()
	q.ev = ev
	q.mu.Unlock()
}

func (q *eventQueue) push(evs ...event) {
	if len(evs) == 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closing {
		// The delivery goroutine is ending; these still go out (no event
		// is dropped), still on a goroutine of their own.
		ev := q.ev
		go func() {
			for _, e := range evs {
				deliver(ev, e)
			}
		}()
		return
	}
	q.items = append(q.items, evs...)
	q.poke()
}

func (q *eventQueue) poke() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// close delivers what is queued, then ends the goroutine; done is closed
// when it has.
func (q *eventQueue) close() {
	q.mu.Lock()
	q.closing = true
	q.mu.Unlock()
	q.poke()
}

func (q *eventQueue) run() {
	defer close(q.done)
	for range q.wake {
		for {
			q.mu.Lock()
			items, ev, closing := q.items, q.ev, q.closing
			q.items = nil
			q.mu.Unlock()
			if len(items) == 0 {
				if closing {
					return
				}
				break
			}
			for _, e := range items {
				deliver(ev, e)
			}
		}
	}
}

func deliver(ev backend.Events, e event) {
	if ev == nil {
		return // Attach was never called: nobody counts these events
	}
	switch e.kind {
	case evReady:
		ev.Ready(e.inst)
	case evFailed:
		ev.Failed(e.function, e.err)
	case evExited:
		ev.Exited(e.inst, e.err)
	}
}
