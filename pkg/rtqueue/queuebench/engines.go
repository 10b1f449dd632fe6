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
}

// baselineWorkers is what kube-controller-manager's deployment and
// replicaset controllers run (--concurrent-*-syncs default 5).
const baselineWorkers = 5

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
	q  plainQueue
	wg sync.WaitGroup
}

func (w *workerLoop) start(n int, handle func(key)) {
	for range n {
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

type clientGo struct {
	q workqueue.TypedRateLimitingInterface[key]
	workerLoop
}

func newClientGo() *clientGo {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[key]())
	return &clientGo{q: q, workerLoop: workerLoop{q: q}}
}

func (c *clientGo) add(k key)              { c.q.Add(k) }
func (c *clientGo) len() int               { return c.q.Len() }
func (c *clientGo) start(handle func(key)) { c.workerLoop.start(baselineWorkers, handle) }

type ctrlRuntime struct {
	q priorityqueue.PriorityQueue[key]
	workerLoop
}

// newCtrlRuntime leaves the name empty, which turns the queue's metrics off
// so repeated cases in one process do not collide in its global registry.
func newCtrlRuntime() *ctrlRuntime {
	q := priorityqueue.New[key]("")
	return &ctrlRuntime{q: q, workerLoop: workerLoop{q: q}}
}

func (c *ctrlRuntime) add(k key) {
	p := backgroundPriority
	if k.critical {
		p = criticalPriority
	}
	c.q.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(p)}, k)
}
func (c *ctrlRuntime) len() int               { return c.q.Len() }
func (c *ctrlRuntime) start(handle func(key)) { c.workerLoop.start(baselineWorkers, handle) }

type gantry struct {
	q      *rtqueue.Queue[key]
	pool   *rtqueue.Pool[key]
	cfg    rtqueue.PoolConfig
	cancel context.CancelFunc
	done   chan error
}

func newGantry(realTime bool) *gantry {
	cfg := rtqueue.DefaultPoolConfig()
	cfg.RealTime = realTime
	return &gantry{q: rtqueue.New(rtqueue.Config[key]{}), cfg: cfg, done: make(chan error, 1)}
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

// stop shuts the queue down without the drain Run would do on cancel, to
// match the baselines' stop; the handler skips work once stopping.
func (g *gantry) stop() {
	g.q.ShutDown()
	<-g.done
	g.cancel()
}
