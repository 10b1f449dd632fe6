package gatewaybench

import (
	"strconv"
	"syscall"
	"time"

	"gantry.dev/gantry/pkg/childproc"
)

// clockTick is the unit of utime and stime in /proc/PID/stat: USER_HZ,
// which Linux fixes at 100 on every architecture Go supports.
const clockTick = 10 * time.Millisecond

// cpuUsed is the CPU time (user + system) this process and the children
// with the given pids have used so far. Taken around a path's turn, it
// gives what serving that path cost the whole benchmark: unlike latency,
// CPU time barely stretches when other processes take the machine, so it
// compares the gateways even on a busy machine.
func cpuUsed(pids ...int) time.Duration {
	var ru syscall.Rusage
	var total time.Duration
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		total += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	for _, pid := range pids {
		total += procCPU(pid)
	}
	return total
}

// procCPU reads a live process's utime and stime; 0 if it cannot.
func procCPU(pid int) time.Duration {
	// utime and stime are fields 14 and 15 of the line, the 12th and
	// 13th after the command name.
	f := childproc.StatFields(pid)
	if len(f) < 13 {
		return 0
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(ut+st) * clockTick
}
