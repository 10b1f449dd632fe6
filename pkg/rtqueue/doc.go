// Package rtqueue is Gantry's priority-preemptive event engine: a
// deduplicating multi-priority work queue that drops into any client-go
// controller, and a pool of OS-thread-locked workers that run under
// SCHED_FIFO when the process may, so that an event for a critical workload
// starts processing at once whatever else the controller is doing.
//
// Priorities are ints 0..99 and a higher number is more critical,
// everywhere: in queue order, in the reserve floor and in the mapping to
// real-time thread priorities. docs/engine.md explains the design and how
// Go's scheduler and SCHED_FIFO interact.
package rtqueue

import "errors"

// MinPriority and MaxPriority bound every priority the engine accepts.
const (
	MinPriority = 0
	MaxPriority = 99
	numLevels   = MaxPriority + 1
)

var (
	// ErrInvalidConfig reports a pool or queue configuration that cannot work.
	ErrInvalidConfig = errors.New("rtqueue: invalid config")
	// ErrRealtimeDenied reports that the kernel refused a real-time policy.
	ErrRealtimeDenied = errors.New("rtqueue: real-time scheduling denied")
	// ErrUnsupported reports a scheduling call on a platform without it.
	ErrUnsupported = errors.New("rtqueue: scheduling policy calls unsupported on this platform")
)

// clampPriority keeps callers' out-of-range priorities usable instead of
// dropping their items: below 0 is treated as 0, above 99 as 99.
func clampPriority(p int) int {
	return min(max(p, MinPriority), MaxPriority)
}
