package localcluster

import "syscall"

// componentAttr puts a component in its own process group, and has the
// kernel kill it if the process that started it dies.
func componentAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
