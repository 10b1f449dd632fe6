//go:build linux

package rtqueue

import (
	"context"
	"testing"

	"golang.org/x/sys/unix"
)

// TestOSSchedulerOnThisKernel runs real workers with real sched_setattr
// calls. Where the process has CAP_SYS_NICE the handler must observe
// SCHED_FIFO at the mapped priority on its own thread; where it does not,
// the pool must have fallen back and the thread must be SCHED_OTHER.
func TestOSSchedulerOnThisKernel(t *testing.T) {
	type seen struct{ policy, prio uint32 }
	got := make(chan seen, 1)
	r := startPool(t, Config[string]{}, func(context.Context, string) error {
		attr, err := unix.SchedGetAttr(0, 0)
		if err != nil {
			return err
		}
		got <- seen{attr.Policy, attr.Priority}
		return nil
	}, PoolConfig{Min: 1, Max: 1, RealTime: true})
	r.q.AddWithPriority("critical", 99)
	s := <-got
	if r.pool.Policy() == PolicyFIFO {
		want := DefaultMapping().Busy(99).RTPriority
		if s.policy != unix.SCHED_FIFO || int(s.prio) != want {
			t.Fatalf("handler thread policy=%d prio=%d, want SCHED_FIFO/%d", s.policy, s.prio, want)
		}
		t.Logf("CAP_SYS_NICE granted: handler ran SCHED_FIFO/%d", s.prio)
		return
	}
	if s.policy != unix.SCHED_NORMAL {
		t.Fatalf("after fallback the handler thread runs policy %d, want SCHED_OTHER", s.policy)
	}
	t.Log("SCHED_FIFO refused by this kernel: pool fell back to SCHED_OTHER")
}
