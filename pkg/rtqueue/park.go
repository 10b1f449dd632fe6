package rtqueue

// parker is how a Get with nothing to take waits: a one-slot channel. Each
// registration in Queue.waiters receives exactly one wake, so a worker
// reuses its parker across waits.
//
// Waking goes through Go's scheduler, which hands a P to the woken
// worker's locked thread. Parking pool workers in the kernel instead (a
// futex the waker signals, so the SCHED_FIFO thread is woken by the kernel
// with no Go thread in between) was measured and rejected: its p99 was no
// better under load, and a worker blocked in the futex syscall keeps its P
// with any goroutine it just readied stuck behind it until sysmon retakes
// the P. docs/engine.md has the numbers.
type parker chan struct{}

func newParker() parker { return make(parker, 1) }

func (p parker) park()   { <-p }
func (p parker) unpark() { p <- struct{}{} }
