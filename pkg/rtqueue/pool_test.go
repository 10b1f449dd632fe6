package rtqueue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/util/workqueue"
)

// fakeSched records what each worker thread was set to and can refuse
// SCHED_FIFO like a kernel without CAP_SYS_NICE.
type fakeSched struct {
	denyFIFO bool
	nextTid  atomic.Int64
	mu       sync.Mutex
	calls    map[int][]SchedParams
}

func newFakeSched(denyFIFO bool) *fakeSched {
	return &fakeSched{denyFIFO: denyFIFO, calls: map[int][]SchedParams{}}
}

func (f *fakeSched) Tid() int { return int(f.nextTid.Add(1)) }

func (f *fakeSched) Set(tid int, p SchedParams) error {
	if f.denyFIFO && p.Policy == PolicyFIFO {
		return fmt.Errorf("%w: injected EPERM", ErrRealtimeDenied)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[tid] = append(f.calls[tid], p)
	return nil
}

func (f *fakeSched) all() []SchedParams {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []SchedParams
	for _, c := range f.calls {
		out = append(out, c...)
	}
	return out
}

// countingHandler counts slog records at or above Warn.
type countingHandler struct {
	warns atomic.Int64
	slog.Handler
}

func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		h.warns.Add(1)
	}
	return nil
}
func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }

type poolRig struct {
	q    *Queue[string]
	pool *Pool[string]
	stop context.CancelFunc
	done chan error
}

func startPool(t *testing.T, qcfg Config[string], h Handler[string], cfg PoolConfig) *poolRig {
	t.Helper()
	q := New(qcfg)
	p := NewPool(q, h, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	r := &poolRig{q: q, pool: p, stop: cancel, done: make(chan error, 1)}
	go func() { r.done <- p.Run(ctx) }()
	t.Cleanup(r.shutdown)
	return r
}

func (r *poolRig) shutdown() {
	r.stop()
	<-r.done
	r.done <- nil // make a second shutdown call a no-op
}

func fastLimiter() workqueue.TypedRateLimiter[string] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Microsecond, time.Millisecond)
}

func TestPoolRetriesFailuresAndForgetsSuccesses(t *testing.T) {
	var calls atomic.Int64
	done := make(chan struct{})
	h := func(_ context.Context, item string) error {
		switch calls.Add(1) {
		case 1:
			return errors.New("transient")
		case 2:
			panic("handler bug")
		case 3:
			close(done)
		}
		return nil
	}
	logs := &countingHandler{}
	r := startPool(t, Config[string]{RateLimiter: fastLimiter()}, h,
		PoolConfig{Min: 2, Max: 2, IdleThreshold: 1, Scheduler: newFakeSched(false), Logger: slog.New(logs)})
	r.q.Add("a")
	<-done
	waitFor(t, "Forget after success", func() bool { return r.q.NumRequeues("a") == 0 && r.q.Len() == 0 })
	if got := calls.Load(); got != 3 {
		t.Fatalf("handler called %d times, want 3 (error, panic, success)", got)
	}
	if got := logs.warns.Load(); got != 1 {
		t.Fatalf("%d warnings or errors logged, want one for the panic (a plain error is routine)", got)
	}
}

func TestPoolRunRejectsBadConfig(t *testing.T) {
	q := New(Config[string]{})
	defer q.ShutDown()
	for _, cfg := range []PoolConfig{
		{Min: 5, Max: 3},
		{Min: 3, Max: 5, Reserve: 3},
		{Min: 3, Max: 5, Reserve: 1, ReserveFloor: 0},
		{Mapping: LinearMapping{IdleRT: 50, MinRT: 10, MaxRT: 90, RTFloor: 50}},
	} {
		err := NewPool(q, func(context.Context, string) error { return nil }, cfg).Run(context.Background())
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Run(%+v) = %v, want ErrInvalidConfig", cfg, err)
		}
	}
	if err := NewPool[string](q, nil, PoolConfig{}).Run(context.Background()); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("nil handler: Run = %v, want ErrInvalidConfig", err)
	}
	if err := NewPool(nil, func(context.Context, string) error { return nil }, PoolConfig{}).Run(context.Background()); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("nil queue: Run = %v, want ErrInvalidConfig", err)
	}
}

func TestPoolRunTwiceFails(t *testing.T) {
	r := startPool(t, Config[string]{}, func(context.Context, string) error { return nil },
		PoolConfig{Min: 1, Max: 1, Scheduler: newFakeSched(false)})
	waitFor(t, "pool start", func() bool { return r.pool.Stats().Total() == 1 })
	if err := r.pool.Run(context.Background()); !errors.Is(err, ErrPoolRunning) {
		t.Fatalf("second Run = %v, want ErrPoolRunning", err)
	}
}

func TestPoolRunReturnsWhenQueueShutDownElsewhere(t *testing.T) {
	r := startPool(t, Config[string]{}, func(context.Context, string) error { return nil },
		PoolConfig{Min: 2, Max: 2, Scheduler: newFakeSched(false)})
	waitFor(t, "pool start", func() bool { return r.pool.Stats().Total() == 2 })
	r.q.ShutDown()
	if err := <-r.done; err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	r.done <- nil
}

func TestPoolDrainsQueueOnCancel(t *testing.T) {
	var processed atomic.Int64
	r := startPool(t, Config[string]{}, func(context.Context, string) error {
		processed.Add(1)
		return nil
	}, PoolConfig{Min: 2, Max: 2, Scheduler: newFakeSched(false)})
	for i := range 50 {
		r.q.AddWithPriority(fmt.Sprint(i), i)
	}
	r.shutdown()
	if got := processed.Load(); got != 50 {
		t.Fatalf("processed %d of 50 items before Run returned, want all (drain)", got)
	}
}

// blockingHandler holds every item until released, so tests can pin
// workers busy.
type blockingHandler struct {
	started chan string
	release chan struct{}
}

func newBlocking() *blockingHandler {
	return &blockingHandler{started: make(chan string, 100), release: make(chan struct{})}
}

func (b *blockingHandler) handle(_ context.Context, item string) error {
	b.started <- item
	<-b.release
	return nil
}

func TestWatchdogGrowsToMaxAndShrinksToMin(t *testing.T) {
	b := newBlocking()
	cfg := PoolConfig{Min: 4, Max: 8, IdleThreshold: 2, Reserve: 1, ReserveFloor: 50, Scheduler: newFakeSched(false)}
	r := startPool(t, Config[string]{}, b.handle, cfg)
	waitFor(t, "Min workers", func() bool { return r.pool.Stats().Total() == cfg.Min })
	for i := range 20 {
		r.q.AddWithPriority(fmt.Sprint("bg", i), 0)
	}
	general := cfg.Max - cfg.Reserve
	for range general {
		<-b.started
	}
	s := r.pool.Stats()
	if s.Total() != cfg.Max || s.GeneralBusy != general || s.ReserveIdle != 1 {
		t.Fatalf("under saturation: %+v, want %d workers, %d general busy, reserve idle", s, cfg.Max, general)
	}
	close(b.release)
	waitFor(t, "queue to empty", func() bool { return r.q.Len() == 0 })
	waitFor(t, "shrink", func() bool {
		s := r.pool.Stats()
		return s.GeneralBusy == 0 && (s.GeneralIdle <= cfg.IdleThreshold || s.Total() == cfg.Min)
	})
	if s := r.pool.Stats(); s.Total() != cfg.Min || s.ReserveIdle != 1 {
		t.Fatalf("after load: %+v, want back at Min=%d with the reserve kept", s, cfg.Min)
	}
}

func TestWatchdogRule(t *testing.T) {
	cfg := PoolConfig{Min: 10, Max: 20, IdleThreshold: 3}
	for _, tc := range []struct {
		c            census
		grow, retire bool
	}{
		{census{idle: 2, busy: 8}, true, false},
		{census{idle: 2, busy: 18}, false, false}, // at Max
		{census{idle: 3, busy: 7}, false, false},  // at threshold
		{census{idle: 4, busy: 10}, false, true},  // too many idle, above Min
		{census{idle: 4, busy: 6}, false, false},  // at Min
		{census{idle: 5, busy: 3, reserve: 2}, false, false},
	} {
		if got := shouldGrow(tc.c, cfg); got != tc.grow {
			t.Errorf("shouldGrow(%+v) = %v, want %v", tc.c, got, tc.grow)
		}
		if got := shouldRetire(tc.c, cfg); got != tc.retire {
			t.Errorf("shouldRetire(%+v) = %v, want %v", tc.c, got, tc.retire)
		}
	}
}

// TestCriticalItemNeverWaitsForLowWork is the reserve's promise: with every
// general worker held by low-priority work, a critical item still starts.
func TestCriticalItemNeverWaitsForLowWork(t *testing.T) {
	b := newBlocking()
	cfg := PoolConfig{Min: 3, Max: 3, IdleThreshold: 1, Reserve: 1, ReserveFloor: 50, Scheduler: newFakeSched(false)}
	r := startPool(t, Config[string]{}, b.handle, cfg)
	for i := range 10 {
		r.q.AddWithPriority(fmt.Sprint("bg", i), 5)
	}
	<-b.started
	<-b.started
	r.q.AddWithPriority("critical", 80)
	if got := <-b.started; got != "critical" {
		t.Fatalf("next started item = %q, want critical while general workers are busy", got)
	}
	close(b.release)
}

func TestRealTimeMappingAppliedPerItem(t *testing.T) {
	fs := newFakeSched(false)
	done := make(chan struct{}, 2)
	r := startPool(t, Config[string]{}, func(context.Context, string) error { done <- struct{}{}; return nil },
		PoolConfig{Min: 1, Max: 1, RealTime: true, Scheduler: fs})
	r.q.AddWithPriority("crit", 99)
	<-done
	r.q.AddWithPriority("bg", 0)
	<-done
	waitFor(t, "idle again", func() bool { return r.pool.Stats().GeneralIdle == 1 })
	m := DefaultMapping()
	want := []SchedParams{m.Idle(), m.Busy(99), m.Idle(), m.Busy(0), m.Idle()}
	got := fs.all()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("thread parameters = %v, want %v", got, want)
	}
	if r.pool.Policy() != PolicyFIFO {
		t.Fatalf("Policy = %v, want SCHED_FIFO", r.pool.Policy())
	}
}

func TestFallbackWhenSchedSetattrFails(t *testing.T) {
	fs := newFakeSched(true)
	logs := &countingHandler{}
	reg := prometheus.NewRegistry()
	var processed atomic.Int64
	r := startPool(t, Config[string]{Name: "fb", Registerer: reg},
		func(context.Context, string) error { processed.Add(1); return nil },
		PoolConfig{Min: 3, Max: 3, IdleThreshold: 1, Reserve: 1, ReserveFloor: 50, RealTime: true,
			Scheduler: fs, Logger: slog.New(logs)})
	for i := range 20 {
		r.q.AddWithPriority(fmt.Sprint(i), i*5)
	}
	waitFor(t, "all items", func() bool { return processed.Load() == 20 })
	if r.pool.Policy() != PolicyOther {
		t.Fatalf("Policy = %v, want SCHED_OTHER after refused SCHED_FIFO", r.pool.Policy())
	}
	if got := logs.warns.Load(); got != 1 {
		t.Fatalf("%d warnings logged, want exactly one fallback notice", got)
	}
	for _, p := range fs.all() {
		if p.Policy != PolicyOther || (p.Nice != 0 && p.Nice != DefaultMapping().MaxNice) {
			t.Fatalf("fallback applied %v, want SCHED_OTHER at nice 0 or %d", p, DefaultMapping().MaxNice)
		}
	}
	const policyMetric = `
# HELP gantry_rtqueue_sched_policy 1 for the scheduling policy the workers run under (SCHED_FIFO, or SCHED_OTHER after a fallback or with real time off).
# TYPE gantry_rtqueue_sched_policy gauge
gantry_rtqueue_sched_policy{name="fb",policy="SCHED_FIFO"} 0
gantry_rtqueue_sched_policy{name="fb",policy="SCHED_OTHER"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(policyMetric), "gantry_rtqueue_sched_policy"); err != nil {
		t.Fatal(err)
	}
}

func TestLinearMappingKeepsOneMeaningOfPriority(t *testing.T) {
	for _, b := range []CriticalBand{DefaultCriticalBand(), PaperCriticalBand(),
		{From: 1, To: 99, MinRT: 1, MaxRT: 98}, {From: 70, To: 70, MinRT: 10, MaxRT: 20}, {From: 99, To: 99, MinRT: 50, MaxRT: 93}} {
		m := b.Mapping()
		prev := m.Busy(0)
		for p := 1; p <= MaxPriority; p++ {
			cur := m.Busy(p)
			if !outranksOrEqual(cur, prev) {
				t.Fatalf("band %+v: Busy(%d)=%v ranks below Busy(%d)=%v: higher priority must never run lower", b, p, cur, p-1, prev)
			}
			if !outranksOrEqual(m.Idle(), cur) || m.Idle() == cur {
				t.Fatalf("band %+v: Idle %v does not rank above Busy(%d)=%v", b, m.Idle(), p, cur)
			}
			prev = cur
		}
		if m.Busy(MaxPriority).RTPriority != m.MaxRT || m.Busy(b.To).RTPriority != m.MaxRT {
			t.Fatalf("band %+v: Busy(99)=%v Busy(To)=%v, want both at MaxRT", b, m.Busy(MaxPriority), m.Busy(b.To))
		}
		if b.From < b.To && m.Busy(b.From).RTPriority != m.MinRT {
			t.Fatalf("band %+v: Busy(From)=%v, want MinRT", b, m.Busy(b.From))
		}
		if bg := m.Busy(0); bg.Policy != PolicyOther || bg.Nice != m.MaxNice {
			t.Fatalf("band %+v: Busy(0)=%v, want background work at nice %d", b, bg, m.MaxNice)
		}
		if err := b.Validate(); err != nil {
			t.Fatalf("band %+v: %v", b, err)
		}
	}
}

// The paper's RQ1 gives its ten services the criticalities 1..10. With the
// band for it, each one runs SCHED_FIFO at its own thread priority, in
// order, and the interfering objects (criticality 0) stay background.
func TestPaperBandGivesEachServiceCriticalityItsOwnRealTimePriority(t *testing.T) {
	m := PaperCriticalBand().Mapping()
	seen := map[int]bool{}
	prev := 0
	for c := 1; c <= 10; c++ {
		p := m.Busy(c)
		if p.Policy != PolicyFIFO || p.RTPriority <= prev || seen[p.RTPriority] {
			t.Fatalf("criticality %d runs %v after %d: want SCHED_FIFO above the lower criticalities", c, p, prev)
		}
		seen[p.RTPriority], prev = true, p.RTPriority
	}
	if lo, hi := m.Busy(1).RTPriority, m.Busy(10).RTPriority; lo != 50 || hi != 93 {
		t.Fatalf("criticalities 1..10 span SCHED_FIFO %d..%d, want the whole range 50..93", lo, hi)
	}
	if bg := m.Busy(0); bg.Policy != PolicyOther {
		t.Fatalf("criticality 0 runs %v, want SCHED_OTHER", bg)
	}
}

// With the paper's band, a criticality-1 service still gets a reserve
// worker while criticality-0 interference holds every general worker, and
// its thread runs SCHED_FIFO. Under the fixed cut at 50 it would wait.
func TestPaperBandLetsLowestServiceCriticalityTakeTheReserve(t *testing.T) {
	fs := newFakeSched(false)
	b := newBlocking()
	cfg := PaperCriticalBand().Apply(PoolConfig{Min: 3, Max: 3, IdleThreshold: 1, Reserve: 1, RealTime: true, Scheduler: fs})
	if cfg.ReserveFloor != 1 {
		t.Fatalf("ReserveFloor = %d, want 1", cfg.ReserveFloor)
	}
	r := startPool(t, Config[string]{}, b.handle, cfg)
	for i := range 10 {
		r.q.AddWithPriority(fmt.Sprint("interference", i), 0)
	}
	<-b.started
	<-b.started
	r.q.AddWithPriority("service", 1)
	if got := <-b.started; got != "service" {
		t.Fatalf("next started item = %q, want the criticality-1 service while interference holds the general workers", got)
	}
	if !slices.Contains(fs.all(), (SchedParams{Policy: PolicyFIFO, RTPriority: 50})) {
		t.Fatalf("thread settings %v: the criticality-1 service never ran SCHED_FIFO 50", fs.all())
	}
	close(b.release)
}

func TestCriticalBandValidation(t *testing.T) {
	for _, b := range []CriticalBand{
		{From: 0, To: 10, MinRT: 50, MaxRT: 93},  // background work would be real time
		{From: 20, To: 10, MinRT: 50, MaxRT: 93}, // ends below its start
		{From: 1, To: 100, MinRT: 50, MaxRT: 93},
		{From: 1, To: 10, MinRT: 0, MaxRT: 93},
		{From: 1, To: 10, MinRT: 60, MaxRT: 50},
		{From: 1, To: 10, MinRT: 50, MaxRT: 99}, // no room for idle above
	} {
		if err := b.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Validate(%+v) = %v, want ErrInvalidConfig", b, err)
		}
		if err := b.Apply(PoolConfig{}).Validate(); b.From >= 1 && b.From <= 99 && !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("a pool with band %+v validates: %v", b, err)
		}
	}
}

// outranksOrEqual orders parameters as the kernel does: any FIFO beats
// SCHED_OTHER, higher RT priority wins, lower nice wins.
func outranksOrEqual(a, b SchedParams) bool {
	if a.Policy != b.Policy {
		return a.Policy == PolicyFIFO
	}
	if a.Policy == PolicyFIFO {
		return a.RTPriority >= b.RTPriority
	}
	return a.Nice <= b.Nice
}

func TestRealTimeOffUsesFixedNiceAndNoWarning(t *testing.T) {
	fs := newFakeSched(false)
	logs := &countingHandler{}
	var processed atomic.Int64
	r := startPool(t, Config[string]{}, func(context.Context, string) error { processed.Add(1); return nil },
		PoolConfig{Min: 2, Max: 2, IdleThreshold: 1, Reserve: 1, ReserveFloor: 50, Scheduler: fs, Logger: slog.New(logs)})
	for i := range 10 {
		r.q.AddWithPriority(fmt.Sprint(i), i*10)
	}
	waitFor(t, "all items", func() bool { return processed.Load() == 10 })
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for tid, calls := range fs.calls {
		if len(calls) != 1 || calls[0].Policy != PolicyOther {
			t.Fatalf("thread %d got %v, want exactly one SCHED_OTHER setting for life", tid, calls)
		}
	}
	if logs.warns.Load() != 0 || r.pool.Policy() != PolicyOther {
		t.Fatalf("real time off: %d warnings, policy %v; want none and SCHED_OTHER", logs.warns.Load(), r.pool.Policy())
	}
}

// A controller that starts and stops its engine (a lost and regained lease,
// a test per package) must not leave worker threads or the delay goroutine
// behind.
func TestPoolAndQueueLeaveNoGoroutinesOnShutdown(t *testing.T) {
	before := runtime.NumGoroutine()
	for round := range 3 {
		r := startPool(t, Config[string]{RateLimiter: fastLimiter()}, func(_ context.Context, item string) error {
			if strings.HasSuffix(item, "7") {
				return errors.New("retry me") // leaves delayed retries pending at shutdown
			}
			return nil
		}, PoolConfig{Min: 3, Max: 6, IdleThreshold: 1, Reserve: 1, ReserveFloor: 50, Scheduler: newFakeSched(false)})
		for i := range 40 {
			r.q.AddWithPriority(fmt.Sprint(round, "-", i), i)
		}
		r.shutdown()
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines after shutdown, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(5 * time.Millisecond)
	}
}
