package rtqueue

// parker is how a Get with nothing to take waits. Each registration in
// Queue.waiters receives exactly one unpark, so a worker reuses its parker
// across waits. It is an interface so tests can decide the order in which
// woken workers reach the queue's lock, the order that lost wake-ups
// depend on.
type parker interface {
	park()
	unpark()
}

// chanParker is the engine's parker: a one-slot channel.
//
// Waking goes through Go's scheduler, which hands a P to the woken
// worker's locked thread. Parking pool workers in the kernel instead (a
// futex the waker signals, so the SCHED_FIFO thread is woken by the kernel
// with no Go thread in between) was measured and rejected: its p99 was no
// better under load, and a worker blocked in the futex syscall keeps its P
// with any goroutine it just readied stuck behind it until sysmon retakes
// the P. docs/engine.md has the numbers.
type chanParker chan struct{}

func newParker() parker { return make(chanParker, 1) }

func (p chanParker) park()   { <-p }
func (p chanParker) unpark() { p <- struct{}{} }
