package dispatch

import "sync/atomic"

// CountLocks makes d count how often its lock is taken from now on, for
// the external tests that drive it through the gateway.
func CountLocks(d *Dispatcher) *atomic.Int64 { return d.mu.countLocks() }
