package dispatch

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gantry.dev/gantry/pkg/backend"
	"gantry.dev/gantry/pkg/dispatch/dispatchtest"
	"gantry.dev/gantry/pkg/policy"
	"gantry.dev/gantry/pkg/stack"
)

// fakeBackend records decisions and makes instances ready (dispatchtest).
type fakeBackend = dispatchtest.Backend

func newFake(auto bool) *fakeBackend { return dispatchtest.New(auto) }

func decl(name string, crit int) stack.Function { return dispatchtest.Function(name, crit) }

func newTestDispatcher(t *testing.T, cfg Config, be *fakeBackend, fns ...stack.Function) *Dispatcher {
	t.Helper()
	d, err := New(cfg, be)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fns {
		if err := d.Deploy(context.Background(), f); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

func req(fn string) Request {
	return Request{Function: fn, Size: 100, Deadline: time.Now().Add(time.Second)}
}

func TestColdRequestStartsAnInstanceAndRunsOnIt(t *testing.T) {
	be := newFake(false)
	d := newTestDispatcher(t, Config{}, be, decl("f", 0))
	got := make(chan *Lease, 1)
	go func() {
		l, err := d.Acquire(context.Background(), req("f"))
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	waitFor(t, func() bool { return be.Started("f") == 1 })
	inst := be.MakeReady("f")
	l := <-got
	if l.Instance.ID != inst.ID {
		t.Fatalf("ran on %q, want %q", l.Instance.ID, inst.ID)
	}
	l.Release(10*time.Millisecond, 5)
	st, _ := d.Function("f")
	if st.Stats.Accepted != 1 || st.Stats.Completed != 1 || st.Available != 1 {
		t.Fatalf("stats %+v available %d", st.Stats, st.Available)
	}
}

func TestUnknownFunctionAndBadSize(t *testing.T) {
	d := newTestDispatcher(t, Config{}, newFake(true), decl("f", 0))
	if _, err := d.Acquire(context.Background(), req("nope")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown function: %v", err)
	}
	r := req("f")
	r.Size = -1
	if _, err := d.Acquire(context.Background(), r); err == nil {
		t.Fatal("negative size accepted")
	}
}

func TestQueuePastItsBoundIsRefused(t *testing.T) {
	be := newFake(false)
	f := decl("f", 0)
	f.MaxQueue = 2
	f.MaxScale = 1
	d := newTestDispatcher(t, Config{}, be, f)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range 2 {
		go func() { _, _ = d.Acquire(ctx, req("f")) }()
	}
	waitFor(t, func() bool { st, _ := d.Function("f"); return st.Queued == 2 })
	if _, err := d.Acquire(ctx, req("f")); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("third request: %v, want ErrQueueFull", err)
	}
	st, _ := d.Function("f")
	if st.Stats.Rejected != 1 {
		t.Fatalf("rejected %d, want 1", st.Stats.Rejected)
	}
}

func TestCancelledWaiterLeavesTheQueue(t *testing.T) {
	be := newFake(false)
	d := newTestDispatcher(t, Config{}, be, decl("f", 0))
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := d.Acquire(ctx, req("f"))
		errc <- err
	}()
	waitFor(t, func() bool { st, _ := d.Function("f"); return st.Queued == 1 })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	st, _ := d.Function("f")
	if st.Queued != 0 || st.Stats.Canceled != 1 {
		t.Fatalf("queued %d canceled %d", st.Queued, st.Stats.Canceled)
	}
	// The instance that comes up later finds nothing to run and stays idle.
	be.MakeReady("f")
	st, _ = d.Function("f")
	if st.Running != 0 || st.Available != 1 {
		t.Fatalf("running %d available %d", st.Running, st.Available)
	}
}

func TestAFailedStartFailsTheWaitingRequestWithItsReason(t *testing.T) {
	be := newFake(false)
	d := newTestDispatcher(t, Config{}, be, decl("f", 0))
	errc := make(chan error, 1)
	go func() {
		_, err := d.Acquire(context.Background(), req("f"))
		errc <- err
	}()
	waitFor(t, func() bool { return be.Started("f") == 1 })
	be.Events().Failed("f", errors.New("exec: not found"))
	err := <-errc
	var loop *CrashLoopError
	if !errors.Is(err, ErrStartFailed) || !errors.As(err, &loop) || loop.Reason != "exec: not found" || loop.RetryAfter <= 0 {
		t.Fatalf("got %v, want a crash loop error with the reason and a back-off", err)
	}
	d.Plan()
	if n := be.Started("f"); n != 1 {
		t.Fatalf("%d starts: the tick restarted a function backing off with no request", n)
	}
}

// A critical function's scale-up takes a less critical function's idle
// instance at once when the machine is full.
func TestCriticalScaleUpTakesIdleCapacityFromLessCritical(t *testing.T) {
	be := newFake(true)
	d := newTestDispatcher(t, Config{Capacity: 2}, be, decl("low", 1), decl("high", 9))
	if err := d.Scale("low", 2); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { st, _ := d.Function("low"); return st.Available == 2 })
	l, err := d.Acquire(context.Background(), req("high"))
	if err != nil {
		t.Fatal(err)
	}
	l.Release(time.Millisecond, 1)
	low, _ := d.Function("low")
	if low.Replicas != 1 || d.Live() != 2 {
		t.Fatalf("low has %d replicas, live %d; want 1 and 2", low.Replicas, d.Live())
	}
}

// Busy instances of a less critical function are drained: the capacity
// they free goes to the critical function, not back to them.
func TestBusyLessCriticalInstancesDrainForCritical(t *testing.T) {
	be := newFake(true)
	d := newTestDispatcher(t, Config{Capacity: 1}, be, decl("low", 1), decl("high", 9))
	busy, err := d.Acquire(context.Background(), req("low"))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *Lease, 1)
	go func() {
		l, err := d.Acquire(context.Background(), req("high"))
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	waitFor(t, func() bool { st, _ := d.Function("high"); return st.Queued == 1 })
	if be.Started("high") != 0 {
		t.Fatal("high started past the capacity")
	}
	busy.Release(time.Millisecond, 1) // low's instance drains and stops
	l := <-got
	if l.Instance.Function != "high" {
		t.Fatalf("ran on %+v", l.Instance)
	}
	low, _ := d.Function("low")
	if low.Replicas != 0 {
		t.Fatalf("low kept %d replicas", low.Replicas)
	}
}

// Without criticality (equal levels), a full machine makes the second
// function wait for the first one's instances to age out.
func TestEqualCriticalityDoesNotPreempt(t *testing.T) {
	be := newFake(true)
	d := newTestDispatcher(t, Config{Capacity: 1}, be, decl("a", 5), decl("b", 5))
	if err := d.Scale("a", 1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { st, _ := d.Function("a"); return st.Available == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := d.Acquire(ctx, req("b")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("b got %v; want to wait", err)
	}
	if a, _ := d.Function("a"); a.Replicas != 1 {
		t.Fatalf("a lost its instance to an equal")
	}
}

func TestAppsGroupTheirChainUnderOnePolicy(t *testing.T) {
	d := newTestDispatcher(t, Config{}, newFake(true), decl("a", 0), decl("b", 0))
	if err := d.DeployApp(stack.App{Name: "ab", Functions: []string{"a", "b"}, SLO: 3 * time.Second}); err != nil {
		t.Fatal(err)
	}
	app, ok := d.App("ab")
	if !ok || len(app.Budget) != 2 || app.Budget[1] != 3*time.Second || app.Budget[0] != 1500*time.Millisecond {
		t.Fatalf("app %+v", app)
	}
	if err := d.DeployApp(stack.App{Name: "again", Functions: []string{"a"}}); !errors.Is(err, ErrInUse) {
		t.Fatalf("a function in two apps: %v", err)
	}
	if err := d.Remove(context.Background(), "a"); !errors.Is(err, ErrInUse) {
		t.Fatalf("removing a chained function: %v", err)
	}
	if err := d.RemoveApp("ab"); err != nil {
		t.Fatal(err)
	}
	if err := d.Remove(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
}

// Many goroutines acquire, release, crash and cancel at once while the
// autoscaler plans and instances come, go and die under them: every accepted request ends
// in exactly one counted outcome and nothing deadlocks.
func TestConcurrentRequestsAllEndCounted(t *testing.T) {
	be := newFake(true)
	f := decl("f", 0)
	f.MaxQueue = 100000
	f.Concurrency = 2
	// Half the instances that fail a request pass their health check.
	var checks atomic.Int64
	check := func(context.Context, backend.Instance) error {
		if checks.Add(1)%2 == 0 {
			return errors.New("no answer")
		}
		return nil
	}
	d := newTestDispatcher(t, Config{Tick: time.Millisecond, Check: check}, be, f)
	ctx, stop := context.WithCancel(context.Background())
	go d.Run(ctx)
	defer stop()
	chaos := make(chan struct{})
	go func() {
		for i := 0; ; i++ {
			select {
			case <-chaos:
				return
			case <-time.After(2 * time.Millisecond):
				be.Crash(i * 7)
			}
		}
	}()
	var wg sync.WaitGroup
	const workers, each = 32, 60
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				rctx, cancel := context.WithCancel(context.Background())
				if (w+i)%7 == 0 {
					cancel() // some give up at once, some while queued
				}
				l, err := d.Acquire(rctx, req("f"))
				cancel()
				if err != nil {
					continue
				}
				switch (w * i) % 5 {
				case 0:
					l.Failed(errors.New("connection reset"))
				case 1:
					l.Abandon()
				default:
					l.Release(time.Duration(1+i)*time.Microsecond, 10)
				}
			}
		}()
	}
	wg.Wait()
	close(chaos)
	st, _ := d.Function("f")
	s := st.Stats
	if s.Accepted == 0 || s.Accepted != s.Completed+s.Abandoned+s.Canceled+s.Failed+s.InstanceErrors {
		t.Fatalf("accepted %d but ended: %+v", s.Accepted, s)
	}
	if st.Queued != 0 || st.Running != 0 {
		t.Fatalf("left queued %d running %d", st.Queued, st.Running)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	dispatchtest.WaitFor(t, cond)
}

func TestCapacityBoundsOneLargeScaleUp(t *testing.T) {
	be := newFake(false)
	d := newTestDispatcher(t, Config{Capacity: 3}, be, decl("f", 0))
	if err := d.Scale("f", 10); err != nil {
		t.Fatal(err)
	}
	if got := be.Started("f"); got != 3 || d.Live() != 3 {
		t.Fatalf("started %d, live %d; want 3 with capacity 3", got, d.Live())
	}
}

func TestUpdateDrainsOldInstancesAndKeepsTheApp(t *testing.T) {
	be := newFake(true)
	d := newTestDispatcher(t, Config{}, be, decl("a", 0), decl("b", 0))
	if err := d.DeployApp(stack.App{Name: "ab", Functions: []string{"a", "b"}}); err != nil {
		t.Fatal(err)
	}
	if err := d.Scale("a", 2); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { st, _ := d.Function("a"); return st.Available == 2 })
	nf := decl("a", 7)
	nf.SLO = 3 * time.Second
	if err := d.Update(context.Background(), nf); err != nil {
		t.Fatal(err)
	}
	st, _ := d.Function("a")
	if st.Decl.Criticality != 7 || st.Available != 0 || st.App != "ab" {
		t.Fatalf("after update: %+v", st)
	}
	app, _ := d.App("ab")
	if app.SLO != 4*time.Second {
		t.Fatalf("app SLO %v, want the new sum 4s", app.SLO)
	}
	d.mu.Lock()
	groups := len(d.groups)
	d.mu.Unlock()
	if groups != 1 {
		t.Fatalf("%d groups after update, want 1", groups)
	}
}

// gatedCheck is a health check that answers with the verdict the test
// sends, so a test can look at the dispatcher while the check runs.
type gatedCheck struct {
	asked   chan backend.Instance
	verdict chan error
}

func newGatedCheck() *gatedCheck {
	return &gatedCheck{asked: make(chan backend.Instance, 16), verdict: make(chan error)}
}

func (g *gatedCheck) check(ctx context.Context, inst backend.Instance) error {
	g.asked <- inst
	select {
	case err := <-g.verdict:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// failOne starts one instance of "f", acquires it and reports the request
// failed; it returns the failed instance.
func failOne(t *testing.T, d *Dispatcher, be *fakeBackend) backend.Instance {
	t.Helper()
	got := make(chan *Lease, 1)
	go func() {
		l, err := d.Acquire(context.Background(), req("f"))
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	waitFor(t, func() bool { return be.Started("f") == 1 })
	inst := be.MakeReady("f")
	l := <-got
	l.Failed(errors.New("connection refused"))
	return inst
}

// A request that an instance fails does not kill the instance: it takes no
// request while its health check runs (the next one waits for it, and no
// second instance is started for it), then serves again when healthy.
func TestFailedRequestKeepsAHealthyInstance(t *testing.T) {
	be := newFake(false)
	gc := newGatedCheck()
	f := decl("f", 0)
	f.MaxScale = 1
	d := newTestDispatcher(t, Config{Check: gc.check}, be, f)
	inst := failOne(t, d, be)
	if asked := <-gc.asked; asked.ID != inst.ID {
		t.Fatalf("checked %q, want %q", asked.ID, inst.ID)
	}
	got := make(chan *Lease, 1)
	go func() {
		l, err := d.Acquire(context.Background(), req("f"))
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	waitFor(t, func() bool { st, _ := d.Function("f"); return st.Queued == 1 })
	select {
	case <-got:
		t.Fatal("a request ran on an instance whose health check is still running")
	case <-time.After(20 * time.Millisecond):
	}
	gc.verdict <- nil
	l := <-got
	if l.Instance.ID != inst.ID {
		t.Fatalf("ran on %q, want the checked instance %q", l.Instance.ID, inst.ID)
	}
	l.Release(time.Millisecond, 1)
	st, _ := d.Function("f")
	s := st.Stats
	if s.InstanceErrors != 1 || s.Checks != 1 || s.Crashes != 0 || s.Stopped != 0 || be.Started("f") != 1 || st.Available != 1 {
		t.Fatalf("stats %+v available %d started %d: want the instance kept", s, st.Available, be.Started("f"))
	}
}

// An instance that fails its health check is stopped and replaced, and the
// request waiting for it runs on the replacement.
func TestFailedRequestStopsAnUnhealthyInstance(t *testing.T) {
	be := newFake(false)
	gc := newGatedCheck()
	f := decl("f", 0)
	f.MaxScale = 1
	d := newTestDispatcher(t, Config{Check: gc.check}, be, f)
	inst := failOne(t, d, be)
	<-gc.asked
	got := make(chan *Lease, 1)
	go func() {
		l, err := d.Acquire(context.Background(), req("f"))
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	waitFor(t, func() bool { st, _ := d.Function("f"); return st.Queued == 1 })
	gc.verdict <- errors.New("no answer")
	waitFor(t, func() bool { return be.Started("f") == 2 })
	next := be.MakeReady("f")
	l := <-got
	if l.Instance.ID != next.ID {
		t.Fatalf("ran on %q, want the replacement %q", l.Instance.ID, next.ID)
	}
	l.Release(time.Millisecond, 1)
	stopped := be.Stopped()
	st, _ := d.Function("f")
	if len(stopped) != 1 || stopped[0] != inst.ID || st.Stats.Crashes != 1 || st.Stats.Checks != 1 {
		t.Fatalf("stopped %v stats %+v: want %q stopped as crashed", stopped, st.Stats, inst.ID)
	}
}

// Many requests failing on one instance at once ask for one health check.
func TestConcurrentFailuresCheckOnce(t *testing.T) {
	be := newFake(false)
	gc := newGatedCheck()
	f := decl("f", 0)
	f.MaxScale, f.Concurrency, f.MaxQueue = 1, 16, 1000
	d := newTestDispatcher(t, Config{Check: gc.check}, be, f)
	leases := make(chan *Lease, 16)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := d.Acquire(context.Background(), req("f"))
			if err != nil {
				t.Error(err)
				return
			}
			leases <- l
		}()
	}
	waitFor(t, func() bool { return be.Started("f") == 1 })
	be.MakeReady("f")
	wg.Wait()
	close(leases)
	var fw sync.WaitGroup
	for l := range leases {
		fw.Add(1)
		go func() { defer fw.Done(); l.Failed(errors.New("reset")) }()
	}
	fw.Wait()
	<-gc.asked
	select {
	case inst := <-gc.asked:
		t.Fatalf("a second check of %q", inst.ID)
	case <-time.After(20 * time.Millisecond):
	}
	gc.verdict <- nil
	waitFor(t, func() bool { st, _ := d.Function("f"); return st.Stats.Checks == 1 && st.Available == 1 })
	st, _ := d.Function("f")
	if st.Stats.InstanceErrors != 16 || st.Stats.Crashes != 0 {
		t.Fatalf("stats %+v", st.Stats)
	}
}

// hooked wraps a real policy with the optional hooks the dispatcher uses
// when a policy has them, and records their calls.
type hooked struct {
	policy.Policy
	mu         sync.Mutex
	spec       policy.Spec
	coldStarts []time.Duration
	lookAheads [][]policy.View
	// add is what LookAhead asks for every downstream function.
	add int
}

func (h *hooked) SetColdStart(d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.coldStarts = append(h.coldStarts, d)
}

// Refused passes refusals on to the wrapped policy, which asks for them.
func (h *hooked) Refused(now time.Time, fn int, size float64, n policy.Counts) int {
	if r, ok := h.Policy.(policy.Refuser); ok {
		return r.Refused(now, fn, size, n)
	}
	return 0
}

func (h *hooked) LookAhead(_ time.Time, views []policy.View, out []policy.Decision) {
	h.mu.Lock()
	defer h.mu.Unlock()
	cp := make([]policy.View, len(views))
	for i, v := range views {
		cp[i] = v
		cp[i].Queue = append([]policy.Item(nil), v.Queue...)
		cp[i].Running = append([]policy.Item(nil), v.Running...)
	}
	h.lookAheads = append(h.lookAheads, cp)
	for f := 1; f < len(out); f++ {
		out[f].Add = h.add
	}
}

// hookedFactory builds hooked policies and keeps the latest per app.
type hookedFactory struct {
	mu    sync.Mutex
	byApp map[string]*hooked
	add   int
}

func (f *hookedFactory) new(name string, spec policy.Spec) (policy.Policy, error) {
	p, err := policy.New(name, spec)
	if err != nil {
		return nil, err
	}
	h := &hooked{Policy: p, spec: spec, add: f.add}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.byApp == nil {
		f.byApp = map[string]*hooked{}
	}
	f.byApp[spec.App] = h
	return h, nil
}

func (f *hookedFactory) get(app string) *hooked {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.byApp[app]
}

// The policy plans new instances with the measured cold start, not the
// declared one: every measurement reaches it (a moving average), and a
// policy built later, when the function joins an app, starts from it.
func TestMeasuredColdStartReachesThePolicy(t *testing.T) {
	be := newFake(false)
	pf := &hookedFactory{}
	f, g := decl("f", 0), decl("g", 0)
	f.ColdStart, g.ColdStart = time.Second, time.Second
	f.MinScale = 2
	d := newTestDispatcher(t, Config{Policy: "gantry", NewPolicy: pf.new}, be, f, g)
	if got := pf.get("f").spec.ColdStart; got != time.Second {
		t.Fatalf("before any start the policy plans with %v, want the declared 1s", got)
	}
	d.Plan() // starts f's minimum of two
	waitFor(t, func() bool { return be.Started("f") == 2 })
	be.ReadyWith("f", 300*time.Millisecond)
	be.ReadyWith("f", 400*time.Millisecond)
	h := pf.get("f")
	h.mu.Lock()
	got := append([]time.Duration(nil), h.coldStarts...)
	h.mu.Unlock()
	want := []time.Duration{300 * time.Millisecond, 330 * time.Millisecond} // 0.3 x 400 + 0.7 x 300
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("the policy was told %v, want %v", got, want)
	}
	if st, _ := d.Function("f"); st.ColdStart != want[1] {
		t.Fatalf("status cold start %v, want %v", st.ColdStart, want[1])
	}
	// An app's policy plans with the longest cold start of its chain: f's
	// measured 330 ms against g's declared 1 s, then g's measured 200 ms.
	if err := d.DeployApp(stack.App{Name: "app", Functions: []string{"f", "g"}}); err != nil {
		t.Fatal(err)
	}
	if got := pf.get("app").spec.ColdStart; got != time.Second {
		t.Fatalf("the app's policy starts from %v, want g's declared 1s", got)
	}
	if err := d.Scale("g", 1); err != nil {
		t.Fatal(err)
	}
	be.ReadyWith("g", 200*time.Millisecond)
	app := pf.get("app")
	app.mu.Lock()
	defer app.mu.Unlock()
	if n := len(app.coldStarts); n == 0 || app.coldStarts[n-1] != want[1] {
		t.Fatalf("the app's policy was told %v, want %v last (f's, now the longest)", app.coldStarts, want[1])
	}
}

// A request reaching the first function of a chain runs the Look-Ahead
// Scaler at once, with the request in the head's view, and downstream
// instances start; arrivals further down the chain do not run it.
func TestArrivalAtChainHeadRunsLookAhead(t *testing.T) {
	be := newFake(false)
	pf := &hookedFactory{add: 2}
	d := newTestDispatcher(t, Config{Policy: "gantry", NewPolicy: pf.new}, be, decl("f", 0), decl("g", 0))
	if err := d.DeployApp(stack.App{Name: "app", Functions: []string{"f", "g"}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _, _ = d.Acquire(ctx, req("g")) }()
	waitFor(t, func() bool { st, _ := d.Function("g"); return st.Queued == 1 })
	h := pf.get("app")
	h.mu.Lock()
	n := len(h.lookAheads)
	h.mu.Unlock()
	if n != 0 {
		t.Fatalf("an arrival at the chain's second function ran the look-ahead %d times", n)
	}
	startedG := be.Started("g")
	go func() { _, _ = d.Acquire(ctx, req("f")) }()
	waitFor(t, func() bool { st, _ := d.Function("f"); return st.Queued == 1 })
	h.mu.Lock()
	las := append([][]policy.View(nil), h.lookAheads...)
	h.mu.Unlock()
	if len(las) != 1 || las[0][0].Queued != 1 || len(las[0][0].Queue) != 1 || las[0][1].Queued != 1 {
		t.Fatalf("look-aheads %+v: want one, seeing the request queued at the head and the one at g", las)
	}
	if got := be.Started("g"); got != startedG+2 {
		t.Fatalf("g started %d instances after the arrival at f, want %d more", got-startedG, 2)
	}
}

// Many goroutines arrive at a chain's head at once while instances come
// and the autoscaler ticks: the look-ahead runs, at most once per gap,
// and every request is counted.
func TestLookAheadUnderConcurrentArrivals(t *testing.T) {
	be := newFake(true)
	pf := &hookedFactory{add: 1}
	f, g := decl("f", 0), decl("g", 0)
	f.MaxQueue, g.MaxQueue = 10000, 10000
	d := newTestDispatcher(t, Config{Policy: "gantry", NewPolicy: pf.new, Tick: time.Millisecond}, be, f, g)
	if err := d.DeployApp(stack.App{Name: "app", Functions: []string{"f", "g"}}); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go d.Run(ctx)
	var wg sync.WaitGroup
	start := time.Now()
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				l, err := d.Acquire(context.Background(), req("f"))
				if err != nil {
					t.Error(err)
					return
				}
				l.Release(time.Microsecond, 1)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	h := pf.get("app")
	h.mu.Lock()
	n := len(h.lookAheads)
	h.mu.Unlock()
	if n == 0 || time.Duration(n-1)*policy.LookAheadGap > elapsed {
		t.Fatalf("%d look-aheads in %v: want at least one, at most one per %v", n, elapsed, policy.LookAheadGap)
	}
	st, _ := d.Function("f")
	if st.Stats.Accepted != 800 || st.Stats.Completed != 800 {
		t.Fatalf("stats %+v", st.Stats)
	}
}

// The core's look-ahead policies have both hooks the dispatcher looks for,
// and with the real cypress policy a request arriving at a chain's head
// starts an instance of the next function before any tick.
func TestCorePolicyLookAheadOnArrival(t *testing.T) {
	spec := policy.Spec{App: "a", AppSLO: 2 * time.Second, Window: 10 * time.Second, MinSize: 1, MaxSize: 1000,
		ColdStart: time.Second, Functions: []policy.FunctionSpec{{Name: "f", SLO: time.Second, SizeSensitive: true},
			{Name: "g", SLO: time.Second, SizeSensitive: true}}}
	for _, name := range []string{"gantry", "cypress"} {
		p, err := policy.New(name, spec)
		if err != nil {
			t.Fatal(err)
		}
		if c := p.Caps(); !c.LookAhead || !c.ColdStart {
			t.Errorf("%s: capabilities %+v, want LookAhead and ColdStart", name, c)
		}
	}
	be := newFake(false)
	d := newTestDispatcher(t, Config{Policy: "cypress"}, be, decl("f", 0), decl("g", 0))
	if err := d.DeployApp(stack.App{Name: "app", Functions: []string{"f", "g"}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _, _ = d.Acquire(ctx, req("f")) }()
	waitFor(t, func() bool { st, _ := d.Function("f"); return st.Queued == 1 })
	if be.Started("g") == 0 {
		t.Fatal("no instance of g started at the arrival at f: the look-ahead did not run")
	}
}

// The policy sizes for the strictest SLO target a function of its app
// declares (stack slo_target), else for the gateway's (--slo-target).
func TestSLOTargetReachesThePolicy(t *testing.T) {
	be := newFake(false)
	pf := &hookedFactory{}
	f, g := decl("f", 0), decl("g", 0)
	f.SLOTarget = 99.99
	newTestDispatcher(t, Config{Policy: "gantry", NewPolicy: pf.new, SLOTarget: 0.95}, be, f, g)
	if got := pf.get("f").spec.SLOTarget; math.Abs(got-0.9999) > 1e-12 {
		t.Errorf("f declares 99.99%%: the policy sizes for %v", got)
	}
	if got := pf.get("g").spec.SLOTarget; got != 0.95 {
		t.Errorf("g declares none: the policy sizes for %v, want the gateway's 0.95", got)
	}
}
