package rtqueue

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The lost wake-up of issue 9: one waiter is woken per push, chosen by
// floor, but the woken worker takes the highest item. Here a critical push
// wakes the reserve worker and a low push wakes a general worker; the
// general worker reaches the lock first and takes the critical item. The
// low item must not then wait while the other general worker stays parked.
func TestWokenWorkerThatTakesAnotherItemPassesTheWakeOn(t *testing.T) {
	for _, reserveFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("reserve reaches the lock first=%v", reserveFirst), func(t *testing.T) {
			d := newDriver(t, []int{0, 0, 50}, t.Name())
			defer d.stop()
			d.q.AddWithPriority(1, 99)
			d.q.AddWithPriority(2, 0)
			general, reserve := wokenGeneral(t, d), d.workers[2]
			if !reserve.gate.isWoken() {
				t.Fatal("the critical push did not wake the reserve worker")
			}
			if reserveFirst {
				d.release(reserve, 0)
				d.release(general, 1)
			} else {
				d.release(general, 0)
				d.release(reserve, 1)
			}
			d.check(2)
			d.settle()
		})
	}
}

// wokenGeneral returns the one general worker the two pushes woke.
func wokenGeneral(t *testing.T, d *driver) *gatedWorker {
	t.Helper()
	var out *gatedWorker
	for _, w := range d.workers[:2] {
		if w.gate.isWoken() {
			if out != nil {
				t.Fatal("both general workers woken for one low item")
			}
			out = w
		}
	}
	if out == nil {
		t.Fatal("the low push woke no general worker")
	}
	return out
}

// TestManyGoroutinesNeverStrandAnItem runs the same check with real
// goroutines, in the orders the Go scheduler picks: many workers with mixed
// floors that hold each item for a moment, several producers, and a
// checker that looks whenever no wake-up is on its way. No item may wait
// then while a parked worker's floor admits it.
func TestManyGoroutinesNeverStrandAnItem(t *testing.T) {
	rounds := 1500
	if testing.Short() {
		rounds = 500
	}
	floors := []int{0, 0, 0, 0, 0, 0, 0, 0, 25, 25, 50, 50, 50, 75, 99, 99}
	q := New(Config[int]{})
	workers := make([]*watchedParker, len(floors))
	var wg sync.WaitGroup
	for i, f := range floors {
		workers[i] = &watchedParker{ch: make(chanParker, 1)}
		wg.Go(func() { serveUntilShutdown(q, f, workers[i]) })
	}
	defer func() { q.ShutDown(); wg.Wait() }()
	violation := make(chan string, 1)
	stop := make(chan struct{})
	var checks atomic.Int64
	go watch(q, workers, stop, violation, &checks)
	for round := range rounds {
		produce(q, round)
		waitQuiet(t, q, workers)
		if msg := strandedItem(q, workers); msg != "" {
			t.Fatalf("round %d, all workers parked: %s", round, msg)
		}
	}
	close(stop)
	if msg := <-violation; msg != "" {
		t.Fatal(msg)
	}
	t.Logf("%d checks while workers were busy", checks.Load())
}

// watchedParker counts the wakes it was sent and the woken turns its worker
// has finished, so a checker can tell when no wake-up is in flight.
type watchedParker struct {
	ch               chanParker
	issued, finished atomic.Int64
	inTurn           bool // only the worker's goroutine touches it
}

func (p *watchedParker) unpark() { p.issued.Add(1); p.ch.unpark() }

func (p *watchedParker) park() {
	p.endTurn()
	p.ch.park()
	p.inTurn = true
}

func (p *watchedParker) endTurn() {
	if p.inTurn {
		p.inTurn = false
		p.finished.Add(1)
	}
}

func (p *watchedParker) pending() bool { return p.issued.Load() != p.finished.Load() }

func serveUntilShutdown(q *Queue[int], floor int, p *watchedParker) {
	for {
		item, _, shutdown := q.getAtLeast(floor, p)
		p.endTurn()
		if shutdown {
			return
		}
		time.Sleep(20 * time.Microsecond) // hold the item so others must be woken
		q.Done(item)
	}
}

// produce pushes a short burst from four goroutines at once, mixing
// critical and low priorities so wakes for reserve and general workers
// interleave.
func produce(q *Queue[int], round int) {
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(round), uint64(g)))
			for range 2 {
				prio := rng.IntN(25)
				if rng.IntN(2) == 0 {
					prio = 50 + rng.IntN(50)
				}
				q.AddWithPriority(rng.IntN(64), prio)
			}
		})
	}
	wg.Wait()
}

// watch checks the invariant whenever it finds no wake-up in flight, until
// stop; it reports the first violation, or "".
func watch(q *Queue[int], workers []*watchedParker, stop <-chan struct{}, violation chan<- string, checks *atomic.Int64) {
	for {
		select {
		case <-stop:
			violation <- ""
			return
		default:
		}
		if msg := strandedItem(q, workers); msg != "" {
			violation <- msg
			return
		}
		checks.Add(1)
		time.Sleep(10 * time.Microsecond)
	}
}

// strandedItem reports an item that waits while a parked worker admits it
// and no wake-up is on its way ("" if none, or if a wake-up is in flight).
func strandedItem(q *Queue[int], workers []*watchedParker) string {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, w := range workers {
		if w.pending() {
			return ""
		}
	}
	top := q.waiting.highestAtLeast(MinPriority)
	for _, w := range q.waiters {
		if top >= 0 && w.floor <= top {
			return fmt.Sprintf("%d items wait (highest priority %d) while a worker with floor %d is parked and no wake-up is in flight",
				q.waiting.size, top, w.floor)
		}
	}
	return ""
}

// waitQuiet waits until every worker is parked with no wake-up in flight.
// The deadline turns a hang into a failure; it is not what the test
// asserts.
func waitQuiet(t *testing.T, q *Queue[int], workers []*watchedParker) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !quiet(q, workers) {
		if time.Now().After(deadline) {
			t.Fatal("the workers did not all park within 30s")
		}
		time.Sleep(50 * time.Microsecond)
	}
}

func quiet(q *Queue[int], workers []*watchedParker) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, w := range workers {
		if w.pending() {
			return false
		}
	}
	return len(q.waiters) == len(workers)
}
