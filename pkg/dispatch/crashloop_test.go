package dispatch

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"gantry.dev/gantry/pkg/policy"
)

// fakeClock is a clock the test steps.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	return c.t
}

// wake does what Run does at an instant: plan at a tick, else expire and
// start the probes whose back-off ended.
func wake(d *Dispatcher, tick bool) {
	if tick {
		d.Plan()
		return
	}
	d.Expire()
	d.Restart()
}

// acquireNow sends one request and waits for its end: a request refused
// while backing off returns at once, one that waits on a probe returns
// when the probe's failure arrives.
func acquireNow(t *testing.T, d *Dispatcher) (*Lease, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := d.Acquire(ctx, req("f"))
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatal("a request at a crash-looping function waited 10 s for an answer")
	}
	return l, err
}

// A function that can never start, under a request every 100 ms: at most
// 10 starts in the first minute (kubelet-style back-off, one probe at a
// time), every request refused with the exit reason, no restart once the
// requests stop, and the fixed function serves on the next request.
func TestCrashLoopBacksOffUnderSteadyRequests(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	be := newFake(true)
	be.FailStarts("f", errors.New("instance f-1 exited before ready with exit code 127; last stderr: sh: 1: nope: not found"))
	f := decl("f", 0)
	d := newTestDispatcher(t, Config{Now: clock.Now, Tick: 500 * time.Millisecond}, be, f)
	const step = 100 * time.Millisecond
	refusedAtOnce := 0
	for i := range 600 {
		wake(d, i%5 == 0)
		before := be.Started("f")
		_, err := acquireNow(t, d)
		var loop *CrashLoopError
		if !errors.As(err, &loop) || loop.Reason == "" {
			t.Fatalf("request at %v: %v, want a crash loop error with the reason", time.Duration(i)*step, err)
		}
		if be.Started("f") == before {
			refusedAtOnce++
		}
		clock.Add(step)
	}
	starts := be.Started("f")
	if starts > 10 || starts < 4 {
		t.Fatalf("%d starts in the first minute, want 4 to 10 (back-off, still probing)", starts)
	}
	t.Logf("%d starts in the first minute; %d of 600 requests refused without waiting on a start", starts, refusedAtOnce)
	if refusedAtOnce < 550 {
		t.Fatalf("only %d of 600 requests refused without waiting on a start", refusedAtOnce)
	}
	st, _ := d.Function("f")
	if st.State != StateBackOff || st.Restarts != starts || st.Reason == "" || st.BackOffUntil.IsZero() {
		t.Fatalf("status %q restarts %d reason %q until %v; want backoff, %d restarts, the reason", st.State, st.Restarts, st.Reason, st.BackOffUntil, starts)
	}
	// No more requests: the ones refused during the last back-off ask for
	// one probe when it ends; after that nothing restarts.
	for i := range 6000 {
		clock.Add(step)
		wake(d, i%5 == 0)
		waitFor(t, func() bool { st, _ := d.Function("f"); return st.Starting == 0 })
	}
	if n := be.Started("f"); n > starts+1 {
		t.Fatalf("%d starts in 10 minutes after the requests stopped, want at most the one probe", n-starts)
	}
	// The fix: an update serves at once, backed off or not.
	be.FailStarts("f", nil)
	if err := d.Update(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	l, err := acquireNow(t, d)
	if err != nil {
		t.Fatalf("after the update: %v", err)
	}
	l.Release(time.Millisecond, 1)
	if st, _ := d.Function("f"); st.State != StateReady {
		t.Fatalf("after the update the state is %q", st.State)
	}
}

// Requests arriving while a function backs off are refused at once, not
// queued; a probe's failure fails those that queued behind it.
func TestCrashLoopProbeOnlyOnDemandOrMinScale(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	be := newFake(true)
	be.FailStarts("f", errors.New("exit code 1"))
	f := decl("f", 0)
	f.MinScale = 1
	d := newTestDispatcher(t, Config{Now: clock.Now, Tick: 500 * time.Millisecond}, be, f)
	// Min scale 1 with no requests: probes keep coming, backed off.
	for i := range 600 {
		wake(d, i%5 == 0)
		waitFor(t, func() bool { st, _ := d.Function("f"); return st.Starting == 0 })
		clock.Add(100 * time.Millisecond)
	}
	if n := be.Started("f"); n < 4 || n > 10 {
		t.Fatalf("min scale 1: %d starts in a minute, want 4 to 10", n)
	}
}

// The first crash of a healthy function is replaced at once and its
// queued requests wait for the replacement; a second crash in a row backs
// off and fails them with the reason.
func TestCrashLoopFirstCrashReplacedAtOnce(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	be := newFake(true)
	f := decl("f", 0)
	f.MaxScale = 1
	d := newTestDispatcher(t, Config{Now: clock.Now}, be, f)
	busy, err := acquireNow(t, d)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		l, err := d.Acquire(context.Background(), req("f"))
		if err == nil {
			l.Release(time.Millisecond, 1)
		}
		got <- err
	}()
	waitFor(t, func() bool { st, _ := d.Function("f"); return st.Queued == 1 })
	be.Crash(0)
	if err := <-got; err != nil {
		t.Fatalf("queued behind the first crash: %v, want served by the replacement", err)
	}
	busy.Abandon()
	if n := be.Started("f"); n != 2 {
		t.Fatalf("%d starts, want the replacement", n)
	}
	busy, err = acquireNow(t, d) // on the replacement
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		_, err := d.Acquire(context.Background(), req("f"))
		got <- err
	}()
	waitFor(t, func() bool { st, _ := d.Function("f"); return st.Queued == 1 })
	be.Crash(1)
	err = <-got
	var loop *CrashLoopError
	if !errors.As(err, &loop) || loop.RetryAfter != policy.CrashLoopInitial {
		t.Fatalf("queued behind the second crash: %v, want refused with a %v back-off", err, policy.CrashLoopInitial)
	}
	busy.Abandon()
	if st, _ := d.Function("f"); st.State != StateBackOff || st.Restarts != 2 {
		t.Fatalf("state %q restarts %d, want backoff after 2", st.State, st.Restarts)
	}
}
