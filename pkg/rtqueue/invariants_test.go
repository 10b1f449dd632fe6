package rtqueue

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// The invariant tests run real worker goroutines, each parked on a gate the
// test controls: a woken worker reaches the queue's lock only when the
// test releases it. A seeded or fuzzed sequence of operations so chooses
// the order in which woken workers run, which is what a lost wake-up
// depends on, and the tests can check after every step:
//
//   - no key waits twice, waits while processing, or is held by two workers;
//   - a worker takes the highest waiting priority its floor admits;
//   - whenever no woken worker is still on its way to the lock, no item
//     waits while a parked worker's floor admits it;
//   - and at the end, once everything woken has run, every item is taken.

// gate is a parker whose park blocks until the test releases it.
type gate struct {
	woken   chan struct{} // filled by the queue's unpark
	proceed chan struct{} // the test's release
	stable  chan<- step   // the worker reports that it is parked
}

func (g *gate) unpark() { g.woken <- struct{}{} }

func (g *gate) park() {
	g.stable <- step{parked: true}
	<-g.proceed
	<-g.woken
}

func (g *gate) isWoken() bool { return len(g.woken) == 1 }

// step is where a worker stopped: parked, holding an item, or gone.
type step struct {
	parked, exited bool
	item, priority int
}

type gatedWorker struct {
	floor  int
	gate   *gate
	stable chan step
	finish chan struct{} // the test has called Done; Get again
	at     step
}

// driver owns a queue and its gated workers.
type driver struct {
	t       *testing.T
	q       *Queue[int]
	workers []*gatedWorker
	label   string
}

func newDriver(t *testing.T, floors []int, label string) *driver {
	d := &driver{t: t, q: New(Config[int]{}), label: label}
	for _, f := range floors {
		stable := make(chan step)
		w := &gatedWorker{floor: f, stable: stable, finish: make(chan struct{}),
			gate: &gate{woken: make(chan struct{}, 1), proceed: make(chan struct{}), stable: stable}}
		d.workers = append(d.workers, w)
		go d.run(w)
		w.at = <-w.stable
	}
	return d
}

func (d *driver) run(w *gatedWorker) {
	for {
		item, prio, shutdown := d.q.getAtLeast(w.floor, w.gate)
		if shutdown {
			w.stable <- step{exited: true}
			return
		}
		w.stable <- step{item: item, priority: prio}
		<-w.finish
	}
}

// release lets a woken worker reach the lock and waits for where it stops.
func (d *driver) release(w *gatedWorker, stepNo int) {
	want := highestFor(d.q, w.floor)
	w.gate.proceed <- struct{}{}
	w.at = <-w.stable
	d.checkTaken(w, want, stepNo)
}

// finish calls Done for a worker's item, optionally re-adding the key while
// it is still processing, and lets the worker Get again.
func (d *driver) finish(w *gatedWorker, readd, prio int, stepNo int) {
	if readd > 0 {
		d.q.AddWithPriority(w.at.item, prio)
	}
	d.q.Done(w.at.item)
	want := highestFor(d.q, w.floor)
	w.finish <- struct{}{}
	w.at = <-w.stable
	d.checkTaken(w, want, stepNo)
}

func (d *driver) checkTaken(w *gatedWorker, want, stepNo int) {
	d.t.Helper()
	if !w.at.parked && !w.at.exited && w.at.priority != want {
		d.t.Fatalf("%s step %d: worker with floor %d took priority %d, highest it admits was %d",
			d.label, stepNo, w.floor, w.at.priority, want)
	}
}

func (d *driver) woken() []*gatedWorker {
	var out []*gatedWorker
	for _, w := range d.workers {
		if w.at.parked && w.gate.isWoken() {
			out = append(out, w)
		}
	}
	return out
}

func (d *driver) holding() []*gatedWorker {
	var out []*gatedWorker
	for _, w := range d.workers {
		if !w.at.parked && !w.at.exited {
			out = append(out, w)
		}
	}
	return out
}

// apply runs one operation chosen by three bytes.
func (d *driver) apply(op, a, b byte, stepNo int) {
	switch op % 3 {
	case 0:
		d.q.AddWithPriority(int(a)%12, int(b)%numLevels)
	case 1:
		if ws := d.woken(); len(ws) > 0 {
			d.release(ws[int(a)%len(ws)], stepNo)
		}
	case 2:
		if ws := d.holding(); len(ws) > 0 {
			d.finish(ws[int(a)%len(ws)], int(b)%2, int(b)%numLevels, stepNo)
		}
	}
}

// settle releases woken workers and finishes held items until nothing is
// left to run; every item must then have been taken.
func (d *driver) settle() {
	for stepNo := 0; ; stepNo++ {
		if stepNo > 100000 {
			d.t.Fatalf("%s: the workers never settled", d.label)
		}
		if ws := d.woken(); len(ws) > 0 {
			d.release(ws[0], -stepNo)
		} else if ws := d.holding(); len(ws) > 0 {
			d.finish(ws[0], 0, 0, -stepNo)
		} else {
			break
		}
		d.check(-stepNo)
	}
	if n := d.q.Len(); n > 0 {
		d.t.Fatalf("%s: %d items left waiting beside parked workers", d.label, n)
	}
}

// check verifies the structure and, when no woken worker is on its way to
// the lock, that no parked worker's floor admits a waiting item.
func (d *driver) check(stepNo int) {
	d.t.Helper()
	processing := map[int]bool{}
	for _, w := range d.holding() {
		if processing[w.at.item] {
			d.t.Fatalf("%s step %d: key %d held by two workers", d.label, stepNo, w.at.item)
		}
		processing[w.at.item] = true
	}
	checkStructure(d.t, d.q, processing, d.label, stepNo)
	if len(d.woken()) > 0 {
		return
	}
	for _, w := range d.workers {
		if top := highestFor(d.q, w.floor); w.at.parked && top >= 0 {
			d.t.Fatalf("%s step %d: priority %d waits while a worker with floor %d is parked and no wake-up is pending",
				d.label, stepNo, top, w.floor)
		}
	}
}

// stop shuts the queue down and lets every worker exit.
func (d *driver) stop() {
	d.q.ShutDown()
	for _, w := range d.workers {
		for !w.at.exited {
			if w.at.parked {
				w.gate.proceed <- struct{}{}
			} else {
				d.q.Done(w.at.item)
				w.finish <- struct{}{}
			}
			w.at = <-w.stable
		}
	}
}

// floorsFrom picks 2..8 workers; the first always takes everything, so a
// settled queue must be empty.
func floorsFrom(b []byte) ([]int, []byte) {
	choices := []int{0, 0, 25, 50, 50, 75, 99}
	if len(b) == 0 {
		return []int{0, 50}, b
	}
	n := 2 + int(b[0])%7
	b = b[1:]
	floors := []int{0}
	for i := 1; i < n; i++ {
		f := 0
		if i-1 < len(b) {
			f = choices[int(b[i-1])%len(choices)]
		}
		floors = append(floors, f)
	}
	return floors, b[min(len(b), n-1):]
}

func checkOps(t *testing.T, ops []byte, label string) {
	floors, ops := floorsFrom(ops)
	d := newDriver(t, floors, fmt.Sprintf("%s floors %v", label, floors))
	defer d.stop()
	for stepNo := 0; stepNo+2 < len(ops); stepNo += 3 {
		d.apply(ops[stepNo], ops[stepNo+1], ops[stepNo+2], stepNo)
		d.check(stepNo)
	}
	d.settle()
}

// TestRandomOpsKeepQueueInvariants drives gated workers with a seeded
// random mix of adds, releases of woken workers, and Dones.
func TestRandomOpsKeepQueueInvariants(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		rng := rand.New(rand.NewPCG(seed, seed))
		ops := make([]byte, 8+3*1500)
		for i := range ops {
			ops[i] = byte(rng.IntN(256))
		}
		checkOps(t, ops, fmt.Sprintf("seed %d", seed))
	}
}

// FuzzQueueInvariants lets the fuzzer choose the workers' floors and the
// operations: after the floors, each three bytes are an operation (add,
// release a woken worker, Done), a key or worker, and a priority.
func FuzzQueueInvariants(f *testing.F) {
	f.Add([]byte{0, 1, 50, 1, 0, 0, 0, 1, 90, 2, 1, 0})
	f.Add([]byte{0, 3, 10, 0, 3, 99, 1, 0, 0, 0, 3, 5, 2, 3, 0, 1, 0, 0})
	// Three workers (floors 0, 0, 50): a critical and a low item arrive,
	// and the woken general worker takes the critical one first.
	f.Add([]byte{1, 0, 3, 0, 1, 99, 0, 2, 0, 1, 0, 0, 1, 0, 0})
	f.Fuzz(func(t *testing.T, ops []byte) { checkOps(t, ops, "fuzz") })
}

// highestFor is the highest waiting priority a worker with floor may take,
// or -1.
func highestFor(q *Queue[int], floor int) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.waiting.highestAtLeast(floor)
}

func checkStructure(t *testing.T, q *Queue[int], processing map[int]bool, label string, step int) {
	t.Helper()
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	seen := map[int]bool{}
	for p := range numLevels {
		for e := q.waiting.head[p]; e != nil; e = e.next {
			if seen[e.item] || processing[e.item] || q.queued[e.item] != e || e.priority != p {
				t.Fatalf("%s step %d: key %d waiting twice, while processing, or misfiled", label, step, e.item)
			}
			seen[e.item] = true
			n++
		}
	}
	if n != q.waiting.size || n != len(q.queued) || len(q.active) != len(processing) {
		t.Fatalf("%s step %d: counted %d waiting, size %d, index %d; active %d vs %d",
			label, step, n, q.waiting.size, len(q.queued), len(q.active), len(processing))
	}
}
