//go:build linux

package rtqueue

import (
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	futexWaitPrivate = 0 | 128
	futexWakePrivate = 1 | 128
)

// futexParker parks a worker's locked thread in the kernel. The waker's
// FUTEX_WAKE makes the thread runnable at its own (SCHED_FIFO) priority
// directly, so it preempts whatever runs on a CPU without waiting for any
// other thread, normal-priority ones included, to run Go's scheduler for
// it. On return from the syscall it picks up its old P or an idle one;
// RecommendedGOMAXPROCS keeps one free for every worker.
type futexParker struct{ word uint32 }

func newWorkerParker() parker { return &futexParker{} }

func (f *futexParker) prepare() { atomic.StoreUint32(&f.word, 0) }

func (f *futexParker) park() {
	for atomic.LoadUint32(&f.word) == 0 {
		// EINTR and EAGAIN just loop; the word is the truth.
		unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(&f.word)), futexWaitPrivate, 0, 0, 0, 0)
	}
}

func (f *futexParker) unpark() {
	atomic.StoreUint32(&f.word, 1)
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(&f.word)), futexWakePrivate, 1, 0, 0, 0)
}
