package rtqueue

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"
)

func newTestQueue(t *testing.T, cfg Config[string]) *Queue[string] {
	t.Helper()
	q := New(cfg)
	t.Cleanup(q.ShutDown)
	return q
}

func mustGet(t *testing.T, q *Queue[string]) (string, int) {
	t.Helper()
	item, prio, shutdown := q.GetWithPriority()
	if shutdown {
		t.Fatalf("Get reported shutdown, want an item")
	}
	return item, prio
}

func TestKeyWaitsAtMostOnce(t *testing.T) {
	q := newTestQueue(t, Config[string]{})
	q.Add("a")
	q.Add("a")
	q.AddWithPriority("a", 3)
	if got := q.Len(); got != 1 {
		t.Fatalf("Len = %d after three adds of one key, want 1", got)
	}
}

func TestKeyNeverHandedToTwoWorkers(t *testing.T) {
	q := newTestQueue(t, Config[string]{})
	q.Add("a")
	mustGet(t, q)
	q.Add("a")
	if got := q.Len(); got != 0 {
		t.Fatalf("Len = %d while a is processing, want 0 (it must wait for Done)", got)
	}
	q.Done("a")
	if got := q.Len(); got != 1 {
		t.Fatalf("Len = %d after Done of a dirty key, want 1", got)
	}
	if item, _ := mustGet(t, q); item != "a" {
		t.Fatalf("got %q, want a", item)
	}
}

func TestReaddDuringProcessingRunsAtHigherPriority(t *testing.T) {
	for _, tc := range []struct{ running, readd, want int }{{10, 5, 10}, {10, 80, 80}} {
		q := newTestQueue(t, Config[string]{})
		q.AddWithPriority("a", tc.running)
		mustGet(t, q)
		q.AddWithPriority("a", tc.readd)
		q.Done("a")
		if _, prio := mustGet(t, q); prio != tc.want {
			t.Errorf("running at %d, re-added at %d: processed again at %d, want %d", tc.running, tc.readd, prio, tc.want)
		}
	}
}

func TestDoneWithoutReaddForgetsKey(t *testing.T) {
	q := newTestQueue(t, Config[string]{})
	q.Add("a")
	mustGet(t, q)
	q.Done("a")
	q.Done("a") // a second Done must be harmless, as in client-go
	if got := q.Len(); got != 0 {
		t.Fatalf("Len = %d, want 0", got)
	}
}

func TestHigherPriorityFirstFIFOWithin(t *testing.T) {
	q := newTestQueue(t, Config[string]{})
	q.AddWithPriority("low1", 1)
	q.AddWithPriority("high1", 90)
	q.AddWithPriority("low2", 1)
	q.AddWithPriority("high2", 90)
	q.AddWithPriority("mid", 40)
	want := []string{"high1", "high2", "mid", "low1", "low2"}
	for i, w := range want {
		if got, _ := mustGet(t, q); got != w {
			t.Fatalf("Get #%d = %q, want %q", i, got, w)
		}
	}
}

func TestReaddRaisesButNeverLowersQueuedPriority(t *testing.T) {
	q := newTestQueue(t, Config[string]{})
	q.AddWithPriority("a", 50)
	q.AddWithPriority("b", 40)
	q.AddWithPriority("a", 10) // lower: ignored
	q.AddWithPriority("b", 60) // higher: moves b ahead of a
	if got, prio := mustGet(t, q); got != "b" || prio != 60 {
		t.Fatalf("got %q at %d, want b at 60", got, prio)
	}
	if got, prio := mustGet(t, q); got != "a" || prio != 50 {
		t.Fatalf("got %q at %d, want a at 50", got, prio)
	}
}

// Requeues issued while a key is in flight (AddRateLimited, AddAfter, Add)
// keep its criticality, as a controller's error path needs.
func TestPlainAddReusesPriorityWhileKeyIsHeld(t *testing.T) {
	q := newTestQueue(t, Config[string]{})
	q.AddWithPriority("a", 70)
	mustGet(t, q)
	q.Add("a")
	q.Add("never-seen")
	q.Done("a")
	if _, prio := mustGet(t, q); prio != 70 {
		t.Fatalf("plain Add during processing: priority %d, want 70", prio)
	}
	if _, prio := mustGet(t, q); prio != 0 {
		t.Fatalf("unseen key priority = %d, want 0", prio)
	}
	q.Done("a")
	q.Add("a")
	if _, prio := mustGet(t, q); prio != 0 {
		t.Fatalf("plain Add after the key left the queue: %d, want 0", prio)
	}
	q.Done("a")
	q.AddWithPriority("b", 30)
	q.ForgetPriority("b")
	mustGet(t, q)
	q.Add("b")
	q.Done("b")
	if _, prio := mustGet(t, q); prio != 30 {
		t.Fatalf("ForgetPriority must not lower a queued key: got %d, want 30", prio)
	}
}

// A controller never hears again of a deleted object's key, so the queue's
// per-key memory must end when the key leaves, or churn grows it forever.
func TestPriorityMemoryIsBoundedUnderChurn(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	q := newTestQueue(t, Config[string]{Clock: clk})
	for i := range 5000 {
		key := fmt.Sprintf("ns/obj-%d", i)
		q.AddWithPriority(key, i%100)
		mustGet(t, q)
		if i%2 == 0 {
			q.AddAfter(key, time.Second) // a retry still pending when Done
		}
		q.Done(key)
	}
	if n := q.remembered(); n != 2500 {
		t.Fatalf("remembered %d priorities with 2500 retries pending, want 2500", n)
	}
	waitFor(t, "delay timer", clk.HasWaiters)
	clk.Step(time.Second)
	waitFor(t, "retries", func() bool { return q.Len() == 2500 })
	for range 2500 {
		key, prio := mustGet(t, q)
		if want := indexOf(t, key) % 100; prio != want {
			t.Fatalf("retry of %s at priority %d, want its original %d", key, prio, want)
		}
		q.Done(key)
	}
	if n := q.remembered(); n != 0 {
		t.Fatalf("remembered %d priorities after every key left, want 0", n)
	}
}

func indexOf(t *testing.T, key string) int {
	t.Helper()
	var i int
	if _, err := fmt.Sscanf(key, "ns/obj-%d", &i); err != nil {
		t.Fatalf("key %q: %v", key, err)
	}
	return i
}

func (q *Queue[T]) remembered() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.lastPrio)
}

func TestOutOfRangePriorityIsClampedNotDropped(t *testing.T) {
	q := newTestQueue(t, Config[string]{})
	q.AddWithPriority("neg", -5)
	q.AddWithPriority("huge", 500)
	if got, prio := mustGet(t, q); got != "huge" || prio != MaxPriority {
		t.Fatalf("got %q at %d, want huge at 99", got, prio)
	}
	if got, prio := mustGet(t, q); got != "neg" || prio != MinPriority {
		t.Fatalf("got %q at %d, want neg at 0", got, prio)
	}
}

// waitFor polls cond; used only where a background goroutine (the delay
// loop) must act after a fake-clock step.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestAddAfterWaitsForClock(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	q := newTestQueue(t, Config[string]{Clock: clk})
	q.AddWithPriority("a", 60)
	mustGet(t, q)
	q.AddAfter("a", 50*time.Millisecond)
	q.AddAfter("a", 20*time.Millisecond) // earlier ready time wins
	q.Done("a")
	waitFor(t, "delay timer", clk.HasWaiters)
	clk.Step(10 * time.Millisecond)
	if q.Len() != 0 {
		t.Fatalf("item ready before its delay")
	}
	waitFor(t, "delay timer", clk.HasWaiters)
	clk.Step(10 * time.Millisecond)
	waitFor(t, "delayed item", func() bool { return q.Len() == 1 })
	if _, prio := mustGet(t, q); prio != 60 {
		t.Fatalf("delayed item priority = %d, want 60", prio)
	}
}

func TestAddAfterNonPositiveIsImmediate(t *testing.T) {
	q := newTestQueue(t, Config[string]{})
	q.AddAfter("a", 0)
	q.AddAfter("b", -time.Second)
	if q.Len() != 2 {
		t.Fatalf("Len = %d, want 2", q.Len())
	}
}

func TestAddRateLimitedBacksOffExponentially(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	rl := workqueue.NewTypedItemExponentialFailureRateLimiter[string](10*time.Millisecond, time.Second)
	q := newTestQueue(t, Config[string]{Clock: clk, RateLimiter: rl})
	q.AddRateLimited("a") // 10ms
	q.AddRateLimited("a") // 20ms; the delayed entry keeps the earlier 10ms
	if got := q.NumRequeues("a"); got != 2 {
		t.Fatalf("NumRequeues = %d, want 2", got)
	}
	waitFor(t, "delay timer", clk.HasWaiters)
	clk.Step(10 * time.Millisecond)
	waitFor(t, "rate-limited item", func() bool { return q.Len() == 1 })
	q.Forget("a")
	if got := q.NumRequeues("a"); got != 0 {
		t.Fatalf("NumRequeues after Forget = %d, want 0", got)
	}
}

func TestShutDownRefusesAddsButHandsOutQueued(t *testing.T) {
	q := New(Config[string]{})
	q.Add("a")
	q.ShutDown()
	q.Add("b")
	q.AddAfter("c", time.Millisecond)
	if !q.ShuttingDown() {
		t.Fatal("ShuttingDown = false after ShutDown")
	}
	if item, _ := mustGet(t, q); item != "a" {
		t.Fatalf("got %q, want a (queued before shutdown)", item)
	}
	if _, _, shutdown := q.GetWithPriority(); !shutdown {
		t.Fatal("Get on empty shut-down queue did not report shutdown")
	}
}

func TestShutDownWakesParkedGet(t *testing.T) {
	q := New(Config[string]{})
	done := make(chan bool)
	go func() {
		_, shutdown := q.Get()
		done <- shutdown
	}()
	waitFor(t, "Get to park", func() bool { q.mu.Lock(); defer q.mu.Unlock(); return len(q.waiters) == 1 })
	q.ShutDown()
	if !<-done {
		t.Fatal("parked Get returned an item, want shutdown")
	}
}

func TestShutDownWithDrainWaitsForDone(t *testing.T) {
	q := New(Config[string]{})
	q.Add("a")
	q.Add("b")
	mustGet(t, q)
	var drained atomic.Bool
	go func() {
		q.ShutDownWithDrain()
		drained.Store(true)
	}()
	waitFor(t, "shutdown flag", q.ShuttingDown)
	item, _ := mustGet(t, q) // queued work is still handed out
	q.Done(item)
	if drained.Load() {
		t.Fatal("drain returned while an item was still processing")
	}
	q.Done("a")
	waitFor(t, "drain to return", drained.Load)
}

func TestShutDownStopsDrainWait(t *testing.T) {
	q := New(Config[string]{})
	q.Add("a")
	mustGet(t, q)
	ret := make(chan struct{})
	go func() { q.ShutDownWithDrain(); close(ret) }()
	waitFor(t, "shutdown flag", q.ShuttingDown)
	q.ShutDown()
	<-ret
}

func TestReserveGetSkipsLowItems(t *testing.T) {
	q := newTestQueue(t, Config[string]{})
	got := make(chan string)
	go func() {
		item, _, _ := q.getAtLeast(50, newParker())
		got <- item
	}()
	waitFor(t, "reserve Get to park", func() bool { q.mu.Lock(); defer q.mu.Unlock(); return len(q.waiters) == 1 })
	q.AddWithPriority("low", 10)
	q.AddWithPriority("crit", 80)
	if item := <-got; item != "crit" {
		t.Fatalf("reserve worker took %q, want crit", item)
	}
	if item, _ := mustGet(t, q); item != "low" {
		t.Fatalf("general Get took %q, want low", item)
	}
}

// TestConcurrentWorkersNeverShareAKey is client-go's central promise, run
// under -race with many workers hammering a few keys.
func TestConcurrentWorkersNeverShareAKey(t *testing.T) {
	q := New(Config[int]{})
	const keys, adds, workers = 8, 4000, 8
	var inFlight [keys]atomic.Int32
	var violations, processed atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k, prio, shutdown := q.GetWithPriority()
				if shutdown {
					return
				}
				if inFlight[k].Add(1) != 1 {
					violations.Add(1)
				}
				processed.Add(1)
				if prio%3 == 0 {
					q.AddWithPriority(k, prio+1)
				}
				inFlight[k].Add(-1)
				q.Done(k)
			}
		}()
	}
	for i := range adds {
		q.AddWithPriority(i%keys, i%100)
	}
	q.ShutDownWithDrain()
	wg.Wait()
	if violations.Load() != 0 {
		t.Fatalf("%d times a key was processed by two workers at once", violations.Load())
	}
	if processed.Load() < keys {
		t.Fatalf("processed %d items, want at least one per key", processed.Load())
	}
}
