package rtqueue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
)

// Handler processes one item. A non-nil error requeues it rate-limited.
type Handler[T comparable] func(ctx context.Context, item T) error

// PoolConfig configures a Pool. Zero Min, Max and IdleThreshold take the
// reference's defaults 10, 20 and 3; zero Reserve means no reserve.
type PoolConfig struct {
	Min, Max, IdleThreshold int
	// Reserve workers take only items with priority >= ReserveFloor, so a
	// critical item never waits while low-priority work holds every other
	// worker. They count toward Min and Max and are never retired.
	Reserve      int
	ReserveFloor int
	// RealTime tries SCHED_FIFO; if the kernel refuses, the pool falls back
	// to SCHED_OTHER with nice values, logs it once and reports it in the
	// sched_policy metric.
	RealTime bool
	// Mapping turns item priorities into thread parameters; nil means
	// DefaultMapping().
	Mapping Mapping
	// Scheduler applies them; nil means the OS (sched_setattr).
	Scheduler Scheduler
	// Logger receives the one-time fallback notice and handler failures;
	// nil means slog.Default().
	Logger *slog.Logger
}

// DefaultPoolConfig is the engine's recommended setup: the reference's
// sizing, two reserve workers for priorities >= 50, real time on.
func DefaultPoolConfig() PoolConfig {
	return PoolConfig{Min: 10, Max: 20, IdleThreshold: 3, Reserve: 2, ReserveFloor: 50, RealTime: true}
}

// RecommendedGOMAXPROCS is ncpu plus one P per worker the pool may run. A
// locked worker thread can run Go code only while it holds a P; with a P
// to spare for each of them, a woken critical worker never waits for Go's
// scheduler to preempt a busy goroutine, and the kernel (where SCHED_FIFO
// and nice act) decides alone who gets a CPU. docs/engine.md has the
// measurements behind this choice.
func RecommendedGOMAXPROCS(cfg PoolConfig, ncpu int) int {
	cfg = cfg.withDefaults()
	return ncpu + cfg.Max
}

func (c PoolConfig) withDefaults() PoolConfig {
	if c.Min == 0 {
		c.Min = 10
	}
	if c.Max == 0 {
		c.Max = max(20, c.Min)
	}
	if c.IdleThreshold == 0 {
		c.IdleThreshold = 3
	}
	if c.Mapping == nil {
		c.Mapping = DefaultMapping()
	}
	if c.Scheduler == nil {
		c.Scheduler = OSScheduler{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate reports, with ErrInvalidConfig, a configuration Pool.Run would
// refuse, so a command can reject bad flags before it connects anywhere.
func (c PoolConfig) Validate() error { return c.withDefaults().validate() }

func (c PoolConfig) validate() error {
	switch {
	case c.Min < 1 || c.Max < c.Min:
		return fmt.Errorf("%w: need 1 <= Min (%d) <= Max (%d)", ErrInvalidConfig, c.Min, c.Max)
	case c.IdleThreshold < 0:
		return fmt.Errorf("%w: IdleThreshold %d < 0", ErrInvalidConfig, c.IdleThreshold)
	case c.Reserve < 0 || c.Reserve >= c.Min:
		return fmt.Errorf("%w: Reserve %d must be in 0..Min-1 (%d)", ErrInvalidConfig, c.Reserve, c.Min-1)
	case c.Reserve > 0 && (c.ReserveFloor < 1 || c.ReserveFloor > MaxPriority):
		return fmt.Errorf("%w: ReserveFloor %d must be in 1..99", ErrInvalidConfig, c.ReserveFloor)
	}
	if lm, ok := c.Mapping.(LinearMapping); ok {
		return lm.validate()
	}
	return nil
}

// ErrPoolRunning is returned by a second Run on the same pool.
var ErrPoolRunning = errors.New("rtqueue: pool already running")

// Pool runs Handler over a Queue on OS-thread-locked workers and sizes
// itself with the watchdog rule.
type Pool[T comparable] struct {
	q       *Queue[T]
	handle  Handler[T]
	cfg     PoolConfig
	cfgErr  error
	log     *slog.Logger
	metrics *poolMetrics
	started atomic.Bool

	// fallback is set once the kernel refuses SCHED_FIFO; every worker then
	// stays on SCHED_OTHER.
	fallback     atomic.Bool
	fallbackOnce sync.Once

	// mu guards counts (the general workers and the reserve's size, which
	// the watchdog reads) and drives the metrics that mirror them.
	mu     sync.Mutex
	counts census
	// The reserve's busy/idle split is kept in atomics so a reserve worker
	// starting a critical item never waits for mu, which general workers
	// at a lower thread priority hold (Go's mutex has no priority
	// inheritance).
	resIdl atomic.Int64
	resBsy atomic.Int64

	wg      sync.WaitGroup
	live    atomic.Int64
	allGone chan struct{}
}

// NewPool prepares a pool; Run starts it. A bad config is reported by Run.
func NewPool[T comparable](q *Queue[T], h Handler[T], cfg PoolConfig) *Pool[T] {
	if q == nil {
		return &Pool[T]{cfgErr: fmt.Errorf("%w: nil queue", ErrInvalidConfig)}
	}
	cfg = cfg.withDefaults()
	p := &Pool[T]{q: q, handle: h, cfg: cfg, cfgErr: cfg.validate(), log: cfg.Logger,
		metrics: newPoolMetrics(q.name, q.metricsRegisterer), allGone: make(chan struct{})}
	if h == nil {
		p.cfgErr = fmt.Errorf("%w: nil handler", ErrInvalidConfig)
	}
	p.metrics.setPolicy(p.intendedPolicy())
	return p
}

func (p *Pool[T]) intendedPolicy() Policy {
	if p.cfg.RealTime && !p.fallback.Load() {
		return PolicyFIFO
	}
	return PolicyOther
}

// Policy is the scheduling policy in effect: SCHED_FIFO, or SCHED_OTHER
// when real time is off or the kernel refused it.
func (p *Pool[T]) Policy() Policy { return p.intendedPolicy() }

// Run starts the workers and blocks until ctx is done (then it shuts the
// queue down with drain) or the queue is shut down by someone else; either
// way it returns once every worker has exited. Handlers get a context that
// is not cancelled by ctx, so the drain can finish in-flight work.
func (p *Pool[T]) Run(ctx context.Context) error {
	if p.cfgErr != nil {
		return p.cfgErr
	}
	if !p.started.CompareAndSwap(false, true) {
		return ErrPoolRunning
	}
	hctx := context.WithoutCancel(ctx)
	p.mu.Lock()
	for range p.cfg.Reserve {
		p.lockedSpawn(hctx, true)
	}
	for range p.cfg.Min - p.cfg.Reserve {
		p.lockedSpawn(hctx, false)
	}
	p.mu.Unlock()
	select {
	case <-ctx.Done():
		p.q.ShutDownWithDrain()
	case <-p.allGone:
	}
	p.wg.Wait()
	return nil
}

// PoolStats is a snapshot of the pool.
type PoolStats struct {
	GeneralIdle, GeneralBusy int
	ReserveIdle, ReserveBusy int
	Policy                   Policy
}

// Total is every live worker.
func (s PoolStats) Total() int { return s.GeneralIdle + s.GeneralBusy + s.ReserveIdle + s.ReserveBusy }

// Stats reports the current worker counts. The reserve's split is read
// without the pool lock, so a snapshot taken while a reserve worker changes
// state may show it neither busy nor idle for an instant.
func (p *Pool[T]) Stats() PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return PoolStats{GeneralIdle: p.counts.idle, GeneralBusy: p.counts.busy,
		ReserveIdle: int(p.resIdl.Load()), ReserveBusy: int(p.resBsy.Load()), Policy: p.intendedPolicy()}
}

// lockedSpawn starts a worker counted idle at once, so concurrent growth
// decisions see it before its goroutine runs.
func (p *Pool[T]) lockedSpawn(ctx context.Context, reserve bool) {
	if reserve {
		p.resIdl.Add(1)
		p.counts.reserve++
	} else {
		p.counts.idle++
	}
	p.lockedPublish()
	p.wg.Add(1)
	p.live.Add(1)
	go p.work(ctx, reserve)
}

func (p *Pool[T]) lockedPublish() {
	m := p.metrics
	m.generalIdle.Set(float64(p.counts.idle))
	m.generalBusy.Set(float64(p.counts.busy))
	p.publishReserve()
}

func (p *Pool[T]) publishReserve() {
	p.metrics.reserveIdle.Set(float64(p.resIdl.Load()))
	p.metrics.reserveBusy.Set(float64(p.resBsy.Load()))
}
