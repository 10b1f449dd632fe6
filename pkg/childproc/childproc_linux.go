package childproc

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// Attr is the SysProcAttr a child needs: a process group of its own and a
// parent-death signal.
func Attr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// The kernel sends the parent-death signal when the thread that forked the
// child exits, not the process, and Go ends threads on purpose (a goroutine
// that exits while locked to its thread takes the thread with it, as the
// rtqueue workers do). So every child is forked from one locked thread that
// lives as long as the process.
var (
	spawnOnce sync.Once
	spawnReqs chan func()
)

// Start starts cmd from the long-lived spawner thread. Set cmd.SysProcAttr
// to Attr() (or a copy with more fields) first.
func Start(cmd *exec.Cmd) error {
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
