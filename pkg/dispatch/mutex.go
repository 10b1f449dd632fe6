package dispatch

import (
	"sync"
	"sync/atomic"
)

// mutex is the dispatcher's one lock. It can count how often it is
// taken, so a test can hold the request path to its budget of lock
// acquisitions: with one lock for everything, each extra acquisition on
// the hot path is contention at thousands of requests per second.
type mutex struct {
	sync.Mutex
	// taken counts acquisitions once a test has set it; nil otherwise,
	// so production pays one load. It is atomic so that a test may switch
	// counting on while the backend's goroutines still run.
	taken atomic.Pointer[atomic.Int64]
}

func (m *mutex) Lock() {
	if n := m.taken.Load(); n != nil {
		n.Add(1)
	}
	m.Mutex.Lock()
}

// countLocks switches counting on and returns the counter.
func (m *mutex) countLocks() *atomic.Int64 {
	n := new(atomic.Int64)
	m.taken.Store(n)
	return n
}
