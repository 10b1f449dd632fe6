//go:build linux

package rtqueue

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// OSScheduler calls sched_setattr(2), which sets the policy and the nice
// value or real-time priority of one thread in a single call.
type OSScheduler struct{}

func (OSScheduler) Tid() int { return unix.Gettid() }

func (OSScheduler) Set(tid int, p SchedParams) error {
	attr := unix.SchedAttr{Policy: unix.SCHED_NORMAL, Nice: int32(p.Nice)}
	if p.Policy == PolicyFIFO {
		attr = unix.SchedAttr{Policy: unix.SCHED_FIFO, Priority: uint32(p.RTPriority)}
	}
	err := unix.SchedSetAttr(tid, &attr, 0)
	if err == nil {
		return nil
	}
	if p.Policy == PolicyFIFO && (errors.Is(err, unix.EPERM) || errors.Is(err, unix.EINVAL)) {
		return fmt.Errorf("%w: sched_setattr(%s): %w", ErrRealtimeDenied, p, err)
	}
	return fmt.Errorf("rtqueue: sched_setattr(%s): %w", p, err)
}
