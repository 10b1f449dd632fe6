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
