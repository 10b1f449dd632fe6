package rtcontroller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
)

// Key names an RTResource in the work queue. Events for any incarnation of
// a name share one key, so a name is never reconciled by two workers at once.
type Key = types.NamespacedName

// Handler reconciles one key; an error sends the key back with backoff.
type Handler func(ctx context.Context, key Key) error

// Queue is the work queue the controller enqueues into.
type Queue interface {
	workqueue.TypedRateLimitingInterface[Key]
	// AddWithPriority enqueues key at a criticality in 0..99, higher first.
	AddWithPriority(key Key, priority int)
}

// Engine is a queue plus the workers that drain it. The priority engine and
// the FIFO ablation are interchangeable behind it.
type Engine interface {
	Queue() Queue
	// Run serves the queue with h until ctx ends, then shuts the queue down.
	Run(ctx context.Context, h Handler) error
}

// ErrUnknownQueue is returned for a --queue value that names no engine.
var ErrUnknownQueue = errors.New("unknown queue kind")

// Queue kinds accepted by Options.Queue.
const (
	QueueRT   = "rtqueue" // the priority-preemptive engine
	QueueFIFO = "fifo"    // client-go's workqueue, as vanilla controllers run it
)

// FIFOWorkers matches kube-controller-manager's default for the replicaset
// and deployment controllers, so the ablation is the vanilla baseline.
const FIFOWorkers = 5

// fifoQueue ignores priorities: it is client-go's deduplicating FIFO.
type fifoQueue struct {
	workqueue.TypedRateLimitingInterface[Key]
}

func (q fifoQueue) AddWithPriority(key Key, _ int) { q.Add(key) }

type fifoEngine struct {
	q       fifoQueue
	workers int
}

// NewFIFOEngine returns client-go's rate-limited FIFO workqueue served by
// workers goroutines.
func NewFIFOEngine(workers int) Engine {
	q := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[Key](),
		workqueue.TypedRateLimitingQueueConfig[Key]{Name: "rtresource"})
	return &fifoEngine{q: fifoQueue{q}, workers: max(workers, 1)}
}

func (e *fifoEngine) Queue() Queue { return e.q }

func (e *fifoEngine) Run(ctx context.Context, h Handler) error {
	var wg sync.WaitGroup
	for range e.workers {
		wg.Go(func() {
			for processNext(ctx, e.q, h) {
			}
		})
	}
	<-ctx.Done()
	e.q.ShutDown()
	wg.Wait()
	return nil
}

// processNext handles one key the way client-go controllers do: backoff on
// error, reset backoff on success, and always mark the key done.
func processNext(ctx context.Context, q Queue, h Handler) bool {
	key, shutdown := q.Get()
	if shutdown {
		return false
	}
	defer q.Done(key)
	if err := runHandler(ctx, h, key); err != nil {
		q.AddRateLimited(key)
		return true
	}
	q.Forget(key)
	return true
}

// runHandler turns a handler panic into an error: one bad object must not
// take the controller down, as it did in the reference implementation.
func runHandler(ctx context.Context, h Handler, key Key) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("reconcile %s panicked: %v", key, r)
			// The retry hides the bug unless its stack is logged.
			slog.Error("reconcile panicked; key retried with backoff", "key", key.String(),
				"panic", fmt.Sprint(r), "stack", string(debug.Stack()))
		}
	}()
	return h(ctx, key)
}
