//go:build linux

package rtcontroller

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// goSibling runs f on a goroutine whose thread has the calling thread's
// scheduling policy: a critical reconcile's worker runs SCHED_FIFO on a
// locked thread, and the call it hands off must not fall back to an
// ordinary thread that waits behind every other runnable process. The
// goroutine stays locked to its thread until it ends, so the Go runtime
// retires that thread instead of reusing it with the raised policy.
func goSibling(f func()) {
	attr, err := unix.SchedGetAttr(0, 0)
	if err != nil || attr.Policy != unix.SCHED_FIFO {
		go f()
		return
	}
	go func() {
		runtime.LockOSThread()
		_ = unix.SchedSetAttr(0, attr, 0) // at worst it runs as an ordinary thread
		f()
	}()
}
