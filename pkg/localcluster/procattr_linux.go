package localcluster

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// componentAttr puts a component in its own process group, and has the
// kernel kill it if the process that started it dies.
func componentAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// The kernel sends the parent-death signal when the *thread* that forked the
// child exits, not when the process does. Go ends threads on purpose (a
// goroutine that exits while locked to its thread takes the thread with it,
// which the rtqueue workers do), so components are forked from one thread
// that lives as long as the process.
var (
	spawnOnce sync.Once
	spawnReqs chan func()
)

// startCmd starts cmd from the long-lived spawner thread.
func startCmd(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawnReqs = make(chan func())
		go spawner()
	})
	errc := make(chan error, 1)
	spawnReqs <- func() { errc <- cmd.Start() }
	return <-errc
}

// spawner never returns and never unlocks, so its thread never exits.
func spawner() {
	runtime.LockOSThread()
	for f := range spawnReqs {
		f()
	}
}
