package orchbench

import "syscall"

// childProcAttr has a child process killed with this one, so a benchmark
// killed outright leaves no controller behind.
func childProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
