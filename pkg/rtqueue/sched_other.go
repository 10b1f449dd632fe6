//go:build !linux

package rtqueue

// OSScheduler reports ErrUnsupported off Linux, so the pool falls back to
// plain goroutines on locked threads and says so once.
type OSScheduler struct{}

func (OSScheduler) Tid() int { return 0 }

func (OSScheduler) Set(int, SchedParams) error { return ErrUnsupported }
