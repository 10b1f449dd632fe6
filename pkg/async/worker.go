package async

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/semaphore"
)

// Result is a job's outcome, what its callback carries.
type Result struct {
	// Status is the function's HTTP status, or the gateway's when it
	// answered for the function (404 for a function removed since).
	Status int
	Header http.Header
	Body   []byte
	// Took is the time from the job's acceptance to its result.
	Took time.Duration
	// Retry: the gateway could not run the job now (its queue full, or
	// shutting down); the job goes back to the queue, with no callback.
	Retry bool
}

// Invoker runs a job through the gateway's dispatcher.
type Invoker interface {
	Invoke(ctx context.Context, j *Job) Result
}

// Workers pull jobs and run them. Stop them before closing the Queue.
type Workers struct {
	q   *Queue
	inv Invoker
	log *slog.Logger
	m   *Metrics
	// slots bounds the jobs running at once (Config.Workers, size).
	slots *semaphore.Weighted
	size  int64
	// stopFetch ends the pull loop; abort ends the jobs still running
	// once the drain is over (their jobs go back to the queue).
	stopFetch, abort context.CancelFunc
	runCtx           context.Context
	loopDone         chan struct{}
	running          sync.WaitGroup
}

// StartWorkers starts pulling jobs from q into inv.
func StartWorkers(q *Queue, inv Invoker, m *Metrics, log *slog.Logger) *Workers {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := &Workers{q: q, inv: inv, log: log, m: m, slots: semaphore.NewWeighted(int64(q.cfg.Workers)), size: int64(q.cfg.Workers), loopDone: make(chan struct{})}
	var fetchCtx context.Context
	fetchCtx, w.stopFetch = context.WithCancel(context.Background())
	w.runCtx, w.abort = context.WithCancel(context.Background())
	go w.loop(fetchCtx)
	return w
}

// Stop stops pulling, lets the running jobs finish until ctx ends, then
// ends them: a job that did not finish is handed back to the queue
// (delivered again, with the same call ID).
func (w *Workers) Stop(ctx context.Context) {
	w.stopFetch()
	<-w.loopDone
	done := make(chan struct{})
	go func() { w.running.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		w.abort()
		<-done
	}
	w.abort()
}

// idleWait bounds the pause of a pull loop that found every band empty.
const idleWait = 100 * time.Millisecond

// loop pulls as many jobs as there are free slots, most critical band
// first: a band is asked only for what the bands above it did not fill.
func (w *Workers) loop(ctx context.Context) {
	defer close(w.loopDone)
	pause := time.Millisecond
	for {
		if err := w.slots.Acquire(ctx, 1); err != nil {
			return
		}
		n := int64(1)
		for n < w.size && w.slots.TryAcquire(1) {
			n++
		}
		got := w.pull(ctx, int(n))
		w.slots.Release(n - int64(got))
		if got > 0 {
			pause = time.Millisecond
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, idleWait)
	}
}

// pull fetches up to n jobs, most critical band first, and starts each on
// a slot the loop took for it.
func (w *Workers) pull(ctx context.Context, n int) int {
	got := 0
	for b := Bands - 1; b >= 0 && got < n && ctx.Err() == nil; b-- {
		batch, err := w.q.bands[b].FetchNoWait(n - got)
		if err != nil {
			w.log.Warn("async: pulling jobs", "band", b, "err", err)
			continue
		}
		for msg := range batch.Messages() {
			got++
			w.start(msg)
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			w.log.Warn("async: pulling jobs", "band", b, "err", err)
		}
	}
	return got
}

// start runs one job on a slot already taken.
func (w *Workers) start(msg jetstream.Msg) {
	w.running.Add(1)
	go func() {
		defer func() { w.slots.Release(1); w.running.Done() }()
		w.handle(msg)
	}()
}
