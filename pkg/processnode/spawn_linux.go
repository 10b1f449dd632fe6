package processnode

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// processAttr puts a container's process in a process group of its own, so
// a signal reaches everything it started, and has the kernel kill it if the
// node's process dies.
func processAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// The parent-death signal fires when the thread that forked the child
// exits, not the process, and Go retires threads (a goroutine that exits
// while locked to its thread takes the thread with it). So every container
// is forked from one locked thread that lives as long as the process.
var (
	spawnOnce sync.Once
	spawnReqs chan func()
)

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

// signalGroup sends sig to the process group pgid leads.
func signalGroup(pgid int, sig syscall.Signal) {
	if pgid > 0 {
		_ = syscall.Kill(-pgid, sig)
	}
}
