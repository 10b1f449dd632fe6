package queuebench

import (
	"context"
	"sync"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"

	"gantry.dev/gantry/pkg/rtqueue"
)

// key identifies one work item; critical and background ids are separate.
type key struct {
	critical bool
	id       uint64
}

// Priorities used for the two classes on the queues that have them.
const (
	backgroundPriority = 0
	criticalPriority   = 99
)

// engine is one queue under test plus its workers.
type engine interface {
	add(k key)
	len() int
	start(handle func(key))
	stop()
	// policy names what the workers' threads run at, "-" for goroutine
	// workers whose threads are never touched.
	policy() string
}

// plainQueue is the subset of the client-go and controller-runtime queues
// the baseline worker loop needs.
type plainQueue interface {
	Get() (key, bool)
	Done(key)
	Forget(key)
	Len() int
	ShutDown()
}

// workerLoop runs n goroutine workers the way a vanilla controller does.
type workerLoop struct {
	q       plainQueue
	workers int
	wg      sync.WaitGroup
}

func (w *workerLoop) start(handle func(key)) {
	for range w.workers {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			for {
				k, shutdown := w.q.Get()
				if shutdown {
					return
				}
				handle(k)
				w.q.Forget(k)
				w.q.Done(k)
			}
		}()
	}
}

func (w *workerLoop) stop() {
	w.q.ShutDown()
	w.wg.Wait()
}

func (w *workerLoop) policy() string { return "-" }

type clientGo struct {
	q workqueue.TypedRateLimitingInterface[key]
	workerLoop
}

func newClientGo(workers int) *clientGo {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[key]())
	return &clientGo{q: q, workerLoop: workerLoop{q: q, workers: workers}}
}

func (c *clientGo) add(k key) { c.q.Add(k) }
func (c *clientGo) len() int  { return c.q.Len() }

type ctrlRuntime struct {
	q priorityqueue.PriorityQueue[key]
	workerLoop
}

// newCtrlRuntime leaves the name empty, which turns the queue's metrics off
// so repeated cases in one process do not collide in its global registry.
func newCtrlRuntime(workers int) *ctrlRuntime {
	q := priorityqueue.New[key]("")
	return &ctrlRuntime{q: q, workerLoop: workerLoop{q: q, workers: workers}}
}

func (c *ctrlRuntime) add(k key) {
	p := backgroundPriority
	if k.critical {
		p = criticalPriority
	}
	c.q.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(p)}, k)
}
func (c *ctrlRuntime) len() int { return c.q.Len() }

// gantryVariant switches the engine's three mechanisms on one at a time.
type gantryVariant struct {
	// reserve gives Reserve of the pool's workers to critical items only.
	reserve bool
	// threads: threadsUntouched leaves every worker thread at the
	// process's SCHED_OTHER nice 0, like a goroutine worker's; threadsNice
	// is the pool's fallback without real time (background workers nice
	// 10, reserve nice 0); threadsRT is SCHED_FIFO.
	threads threadMode
}

type threadMode int

const (
	threadsUntouched threadMode = iota
	threadsNice
	threadsRT
)

func gantryVariantOf(queue string) (gantryVariant, bool) {
	switch queue {
	case QueueGantryOrder:
		return gantryVariant{}, true
	case QueueGantryReserve:
		return gantryVariant{reserve: true}, true
	case QueueGantryNoRT:
		return gantryVariant{reserve: true, threads: threadsNice}, true
	case QueueGantry:
		return gantryVariant{reserve: true, threads: threadsRT}, true
	}
	return gantryVariant{}, false
}

// noopScheduler leaves every thread as it is: the rtqueue engine with its
// queue order and its worker pool, but no thread priorities at all.
type noopScheduler struct{}

func (noopScheduler) Set(int, rtqueue.SchedParams) error { return nil }
func (noopScheduler) Tid() int                           { return 0 }

type gantry struct {
	q      *rtqueue.Queue[key]
	pool   *rtqueue.Pool[key]
	cfg    rtqueue.PoolConfig
	v      gantryVariant
	cancel context.CancelFunc
	done   chan error
}

// newGantry builds a fixed pool of exactly workers threads, reserve of
// them kept for critical items when the variant has a reserve, so every
// queue in a comparison has the same number of workers.
func newGantry(v gantryVariant, workers, reserve int) *gantry {
	cfg := rtqueue.DefaultPoolConfig()
	cfg.Min, cfg.Max = workers, workers
	cfg.Reserve = 0
	if v.reserve {
		cfg.Reserve = reserve
	}
	cfg.RealTime = v.threads == threadsRT
	if v.threads == threadsUntouched {
		cfg.Scheduler = noopScheduler{}
	}
	return &gantry{q: rtqueue.New(rtqueue.Config[key]{}), cfg: cfg, v: v, done: make(chan error, 1)}
}

func (g *gantry) add(k key) {
	p := backgroundPriority
	if k.critical {
		p = criticalPriority
	}
	g.q.AddWithPriority(k, p)
}
func (g *gantry) len() int { return g.q.Len() }

func (g *gantry) start(handle func(key)) {
	g.pool = rtqueue.NewPool(g.q, func(_ context.Context, k key) error { handle(k); return nil }, g.cfg)
	ctx, cancel := context.WithCancel(context.Background())
	g.cancel = cancel
	go func() { g.done <- g.pool.Run(ctx) }()
}

func (g *gantry) policy() string {
	if g.v.threads == threadsUntouched {
		return "untouched"
	}
	if g.pool == nil {
		return "-"
	}
	return g.pool.Policy().String()
}

// stop shuts the queue down without the drain Run would do on cancel, to
// match the baselines' stop; the handler skips work once stopping.
func (g *gantry) stop() {
	g.q.ShutDown()
	<-g.done
	g.cancel()
}
