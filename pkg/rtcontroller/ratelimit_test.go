package rtcontroller

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// startWaiters launches one Wait per priority, in order, each entering the
// line only after the previous one did, and returns the order of grants.
func startWaiters(t *testing.T, l *PriorityLimiter, prios ...int) <-chan int {
	t.Helper()
	granted := make(chan int, len(prios))
	for i, p := range prios {
		go func() {
			if err := l.Wait(WithPriority(context.Background(), p)); err == nil {
				granted <- p
			}
		}()
		waitFor(t, func() bool { return l.waiting() == i+1 })
	}
	return granted
}

// waitFor polls a condition that goroutines make true; it is synchronisation,
// not timing: the deadline only turns a hang into a failure.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestPriorityLimiterServesCriticalRequestsFirst(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	l := NewPriorityLimiter(10, 1, clk)
	defer l.Stop()
	if !l.TryAccept() {
		t.Fatal("full bucket refused a request")
	}
	granted := startWaiters(t, l, 1, 1, 1, 90, 50)
	var order []int
	for range 5 {
		waitFor(t, clk.HasWaiters)
		clk.Step(100 * time.Millisecond)
		order = append(order, <-granted)
	}
	if want := []int{90, 50, 1, 1, 1}; !slices.Equal(order, want) {
		t.Fatalf("grant order = %v, want %v", order, want)
	}
}

func TestPriorityLimiterKeepsRate(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	l := NewPriorityLimiter(10, 2, clk)
	defer l.Stop()
	if !l.TryAccept() || !l.TryAccept() {
		t.Fatal("burst of 2 not available")
	}
	if l.TryAccept() {
		t.Fatal("third request passed an empty bucket")
	}
	granted := startWaiters(t, l, 5)
	waitFor(t, clk.HasWaiters)
	clk.Step(99 * time.Millisecond)
	select {
	case <-granted:
		t.Fatal("granted before a token accrued")
	default:
	}
	clk.Step(time.Millisecond)
	<-granted
}

func TestPriorityLimiterUntaggedRequestsYield(t *testing.T) {
	if p := PriorityFrom(context.Background()); p >= 0 {
		t.Fatalf("untagged priority %d, want below every criticality", p)
	}
}

func TestPriorityLimiterCancelledWaiterLeavesLine(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	l := NewPriorityLimiter(10, 1, clk)
	defer l.Stop()
	l.Accept()
	ctx, cancel := context.WithCancel(WithPriority(context.Background(), 99))
	errc := make(chan error, 1)
	go func() { errc <- l.Wait(ctx) }()
	waitFor(t, func() bool { return l.waiting() == 1 })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v, want context.Canceled", err)
	}
	granted := startWaiters(t, l, 1)
	waitFor(t, clk.HasWaiters)
	clk.Step(100 * time.Millisecond)
	if p := <-granted; p != 1 {
		t.Fatalf("granted %d, want the remaining waiter", p)
	}
}

func TestPriorityLimiterStopFailsWaiters(t *testing.T) {
	l := NewPriorityLimiter(1, 1, clocktesting.NewFakeClock(t0))
	l.Accept()
	errc := make(chan error, 1)
	go func() { errc <- l.Wait(context.Background()) }()
	waitFor(t, func() bool { return l.waiting() == 1 })
	l.Stop()
	if err := <-errc; !errors.Is(err, ErrLimiterStopped) {
		t.Fatalf("Wait = %v, want ErrLimiterStopped", err)
	}
	if err := l.Wait(context.Background()); !errors.Is(err, ErrLimiterStopped) {
		t.Fatalf("Wait after Stop = %v, want ErrLimiterStopped", err)
	}
}

// A timer that fires late must not lower the rate: time that passed while
// requests waited is owed to them, even beyond the burst.
func TestPriorityLimiterLateTimerKeepsRate(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	l := NewPriorityLimiter(10, 1, clk)
	defer l.Stop()
	l.Accept()
	granted := startWaiters(t, l, 1, 1, 1)
	waitFor(t, clk.HasWaiters)
	clk.Step(300 * time.Millisecond)
	for range 3 {
		<-granted
	}
	if l.TryAccept() {
		t.Fatal("credit left over after serving the owed requests")
	}
}

// TestCriticalReserveLetsCriticalRequestsThroughAnEmptyBucket: with the
// shared bucket drained by background traffic, a critical request still
// goes at once while the reserve lasts, a background one waits, and once
// the reserve is spent critical requests wait for tokens again (the
// reserve bounds what they add).
func TestCriticalReserveLetsCriticalRequestsThroughAnEmptyBucket(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	l := NewPriorityLimiter(10, 1, clk).WithCriticalReserve(50, 10, 2)
	defer l.Stop()
	if !l.TryAccept() {
		t.Fatal("full bucket refused a request")
	}
	bg := startWaiters(t, l, 1) // waits for the shared bucket
	for i := range 2 {
		ctx, cancel := context.WithTimeout(WithPriority(context.Background(), 90), 5*time.Second)
		if err := l.Wait(ctx); err != nil {
			t.Fatalf("critical request %d waited on an empty shared bucket: %v", i, err)
		}
		cancel()
	}
	crit := startWaiters2(t, l, 90) // the reserve is spent: it queues
	if l.waiting() != 2 {
		t.Fatalf("%d waiting, want the background and the third critical request", l.waiting())
	}
	waitFor(t, clk.HasWaiters)
	clk.Step(100 * time.Millisecond) // one shared and one reserve token
	var got []int
	for _, ch := range []<-chan int{crit, bg} {
		select {
		case p := <-ch:
			got = append(got, p)
		case <-time.After(5 * time.Second):
			t.Fatalf("granted %v; want the critical request from the reserve and the background one from the shared bucket", got)
		}
	}
}

// startWaiters2 is startWaiters for a limiter that already has waiters.
func startWaiters2(t *testing.T, l *PriorityLimiter, p int) <-chan int {
	t.Helper()
	before := l.waiting()
	granted := make(chan int, 1)
	go func() {
		if err := l.Wait(WithPriority(context.Background(), p)); err == nil {
			granted <- p
		}
	}()
	waitFor(t, func() bool { return l.waiting() == before+1 })
	return granted
}

// TestWithoutReserveCriticalRequestsWaitForTheSharedBucket is the same
// start without the reserve: the critical request queues.
func TestWithoutReserveCriticalRequestsWaitForTheSharedBucket(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	l := NewPriorityLimiter(10, 1, clk)
	defer l.Stop()
	l.TryAccept()
	ctx, cancel := context.WithTimeout(WithPriority(context.Background(), 90), 50*time.Millisecond)
	defer cancel()
	if err := l.Wait(ctx); err == nil {
		t.Fatal("a critical request went through an empty bucket without a reserve")
	}
}

// TestReserveIsOnlyForCriticalRequests: a request below the floor never
// draws on the reserve.
func TestReserveIsOnlyForCriticalRequests(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	l := NewPriorityLimiter(10, 1, clk).WithCriticalReserve(50, 10, 5)
	defer l.Stop()
	l.TryAccept()
	ctx, cancel := context.WithTimeout(WithPriority(context.Background(), 49), 50*time.Millisecond)
	defer cancel()
	if err := l.Wait(ctx); err == nil {
		t.Fatal("a request below the floor took a reserve token")
	}
}
