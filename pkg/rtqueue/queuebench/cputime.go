package queuebench

import (
	"syscall"
	"time"
)

// processCPU is the CPU time this process has used so far, user plus
// system. Cases run one after another in one process, so the difference
// over a case's window is that case's cost.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0 // result then leaves the per-CPU figure at 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
